"""Training on a CPU: how many threads, and whether a run is too slow to start (lesson 07).

A small model's step split over threads mostly waits (on a busy machine, for a core), so small models take
one thread; a large one is estimated before it starts and refused if it would take hours, unless ``allow_slow``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

#: On a CPU, a smaller model trains with one thread; the laptop translator (the ``small`` preset,
#: 6.6M parameters with its 4,000-token vocabulary) is faster with two (benchmarks/train_threads.py). So was
#: a 4.98M-parameter variant (d_ff 512) in the recipe search: the line may lie lower than this.
ONE_THREAD_BELOW = 5_000_000
#: A CPU run estimated to take longer than this is refused unless ``allow_slow`` is set.
SLOW_RUN_SECONDS = 2 * 3600.0
#: The model a CPU trains instead: what ``train --dataset multi30k`` picks without a CUDA GPU.
CPU_SIZED = "--preset small"
#: Minutes of that recipe on Multi30k on 2 cores, fastest and slowest seed. The record
#: (benchmarks/results/multi30k-cpu.json) is not installed with the package; tests/test_prose.py keeps them equal.
CPU_SIZED_MINUTES = (30, 30)


def choose_threads(requested: int | None, device: torch.device, parameters: int) -> tuple[int, str]:
    """The number of CPU threads a run should use, and why (for the setup line)."""
    if requested is not None:
        return requested, "--threads"
    if device.type != "cpu":
        return torch.get_num_threads(), "PyTorch's default"
    if os.environ.get("OMP_NUM_THREADS"):
        return torch.get_num_threads(), "OMP_NUM_THREADS"
    if parameters < ONE_THREAD_BELOW:
        return 1, f"under {ONE_THREAD_BELOW // 1_000_000}M parameters; --threads to change"
    return torch.get_num_threads(), (f"PyTorch's default from {ONE_THREAD_BELOW // 1_000_000}M parameters; "
                                     "--threads to change")


def matmul_flops(trials: int = 5, seconds: float = 0.02) -> float:
    """Floating-point operations per second of this process's CPU matmuls, measured now.

    The best of a few short trials, so that a moment of competition from other processes
    does not decide the figure; a machine that stays busy still measures slower.
    """
    n = 384
    # A generator of its own: timing the CPU must not move the run's dropout masks (the global generator's draws).
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
    a @ b
    best = 0.0
    for _ in range(trials):
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or count < 2:
            a @ b
            count += 1
        best = max(best, 2 * n**3 * count / elapsed)
    return best


@dataclass(frozen=True)
class CpuEstimate:
    """How long a run will take on this CPU, and how much disk its checkpoints need."""

    step_seconds: float
    steps: int
    run_seconds: float
    checkpoint_bytes: int
    disk_bytes: int


def estimate_cpu_run(parameters: int, tokens_per_step: int, steps_per_epoch: int, epochs: int | None,
                     max_steps: int | None, keep: int, flops: float | None = None) -> CpuEstimate:
    """Estimate a CPU run from its sizes (nothing is trained)."""
    speed = flops if flops is not None else matmul_flops()
    step = 6.0 * parameters * tokens_per_step / max(speed, 1.0)
    limits = [n for n in (max_steps, None if epochs is None else epochs * steps_per_epoch) if n is not None]
    steps = min(limits) if limits else steps_per_epoch
    size = 12 * parameters
    return CpuEstimate(step, steps, step * steps, size, size * (keep + 1))


class SlowRunError(ValueError):
    """A CPU run estimated to take hours or days, started without ``allow_slow``."""


def duration(seconds: float) -> str:
    """A time in the unit that reads best: "45 s", "12 min", "3.5 h", "2.0 days"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def slow_run_message(e: CpuEstimate, parameters: int, steps_per_epoch: int, device: torch.device) -> str:
    """What a slow CPU run would cost, and what to do instead."""
    return (f"this run would train a {parameters / 1e6:.1f}M-parameter model on the {device.type.upper()} "
            f"({torch.get_num_threads()} threads): about {duration(e.step_seconds)} per step, "
            f"{duration(e.step_seconds * steps_per_epoch)} per epoch of {steps_per_epoch:,} steps, "
            f"{duration(e.run_seconds)} for {e.steps:,} steps (estimated from this CPU's speed now), and "
            f"{e.disk_bytes / 1e9:.1f} GB of disk for its checkpoints ({e.checkpoint_bytes / 1e6:,.0f} MB each, "
            f"--keep and best.pt). Train it on a GPU, or use the CPU-sized model ({CPU_SIZED}, the laptop "
            f"recipe's: {'-'.join(map(str, dict.fromkeys(CPU_SIZED_MINUTES)))} minutes on 2 cores for Multi30k, see "
            f"docs/training.md, \"A real translator on a laptop\"), or pass --allow-slow (allow_slow=True) to start it anyway")
