"""Several processes with ``torchrun`` and DistributedDataParallel, and a polite Ctrl-C (lesson 07).

NCCL on CUDA GPUs, gloo on CPUs, so it also runs on a laptop; launched plainly there is one process and no group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from ..utils import get_device


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands among the training processes."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        """True when several processes train together."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True for the process that prints, logs and writes checkpoints."""
        return self.rank == 0


def init_distributed(device: str = "auto") -> tuple[DistInfo, torch.device]:
    """Join the process group when started by ``torchrun``, and pick this process's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistInfo(), get_device(None if device == "auto" else device)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    chosen = get_device(None if device == "auto" else device)
    if chosen.type == "cuda":
        chosen = torch.device("cuda", local_rank)
        torch.cuda.set_device(chosen)
    elif chosen.type != "cpu":
        raise ValueError(f"training with several processes needs CUDA or the CPU, got device {chosen}")
    if not dist.is_initialized():
        if chosen.type == "cuda":
            dist.init_process_group("nccl", device_id=chosen)
        else:
            dist.init_process_group("gloo")
    return DistInfo(rank, world_size, local_rank), chosen


def cleanup_distributed() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(values: list[float], info: DistInfo, device: torch.device) -> list[float]:
    """Sum a few numbers over all processes (a no-op for one process)."""
    if not info.enabled:
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def all_gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every process's ``obj``, in rank order (``[obj]`` for one process)."""
    if not info.enabled:
        return [obj]
    gathered: list[Any] = [None] * info.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's ``obj`` on every process."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(info: DistInfo) -> None:
    """Wait until every process gets here."""
    if info.enabled:
        dist.barrier()


class StopRequest:
    """Turn the first Ctrl-C (SIGINT) or SIGTERM into a request to stop after the current step."""

    def __init__(self, escalate: bool = True) -> None:
        self.escalate = escalate
        self.requested = False
        self.signal_name = ""
        self._previous: dict[int, Any] = {}
        self._shielded = self._held = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested and signum == signal.SIGINT and self.escalate:
            if self._shielded:
                self._held = True
                return
            raise KeyboardInterrupt
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    @contextlib.contextmanager
    def shield(self) -> Iterator[None]:
        """Hold back a second Ctrl-C while the block runs (a checkpoint being written); raise it after."""
        self._shielded = True
        try:
            yield
        finally:
            self._shielded = False
        if self._held:
            self._held = False
            raise KeyboardInterrupt

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
