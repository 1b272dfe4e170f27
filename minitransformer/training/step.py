"""One training step, the paper's Adam and the divergence test (lesson 07): what the trainer, the ablations and
the benchmarks share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from ..data import Batch
from .loss import label_smoothed_nll


def paper_adam(parameters: Iterable[nn.Parameter], device: torch.device, lr: float = 1.0) -> torch.optim.Adam:
    """Adam with the paper's beta1 = 0.9, beta2 = 0.98 and eps = 1e-9 (section 5.3)."""
    fast = {"fused": True} if device.type == "cuda" else {"foreach": True}
    return torch.optim.Adam(parameters, lr=lr, betas=(0.9, 0.98), eps=1e-9, **fast)


def diverged(loss: Tensor | float, grad_norm: Tensor | None = None) -> bool:
    """True when the loss (or the gradient norm) is NaN or infinite: training has diverged."""
    bad = ~torch.isfinite(loss if isinstance(loss, Tensor) else torch.tensor(loss, dtype=torch.float64))
    if grad_norm is not None:
        bad = bad | ~torch.isfinite(grad_norm)
    return bool(bad)  # one synchronisation with the device


Context = Callable[[], contextlib.AbstractContextManager]


def train_step(module: nn.Module, batches: Sequence[Batch], optimizer: torch.optim.Optimizer, *, scale: float,
               label_smoothing: float, pad_id: int, scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
               clip_norm: float = 0.0, autocast: Context = contextlib.nullcontext, no_sync: Context | None = None,
               check: Callable[[Tensor, Tensor | None], None] | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
    """One optimizer update over ``batches`` (several: gradient accumulation).

    Each batch: forward under ``autocast``, the label-smoothed loss summed over its target tokens,
    backward of that sum times ``scale`` (1 / the target tokens of all the batches: the gradient is a
    per-token mean). Then the gradient norm is clipped, ``check`` may refuse the step (it raises),
    and Adam and the schedule step.
    """
    device = batches[0].src.device
    loss_total = torch.zeros((), device=device)
    nll_total = torch.zeros((), device=device)
    for k, batch in enumerate(batches):
        last = k == len(batches) - 1
        with no_sync() if no_sync is not None and not last else contextlib.nullcontext():
            with autocast():
                logits = module(batch.src, batch.tgt_in)  # (B, T, V)
            loss_sum, nll_sum, _ = label_smoothed_nll(logits, batch.tgt_out, label_smoothing, pad_id)
            (loss_sum * scale).backward()
        loss_total += loss_sum.detach()
        nll_total += nll_sum.detach()
    grad_norm = None
    if clip_norm > 0:
        grad_norm = torch.nn.utils.clip_grad_norm_(module.parameters(), clip_norm)
    if check is not None:
        check(loss_total, grad_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_total, nll_total, grad_norm
