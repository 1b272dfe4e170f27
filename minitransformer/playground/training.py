"""Lesson 07: label smoothing's target and loss floor, and the warm-up schedule.

The smoothed loss H(q, p) >= H(q) never reaches 0 (section 5.4); the rate rises linearly for ``warmup`` steps
and peaks there at factor * (d_model * warmup)^-0.5 (section 5.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor

from ..training.loss import label_smoothed_nll
from ..training.schedule import transformer_lr
from ..utils import check_int, check_number
from .controls import check_figure, figure_size

__all__ = ["SmoothedTarget", "WarmupSchedule", "draw_smoothed_target", "draw_warmup_schedule", "smoothed_target",
           "warmup_schedule"]


@dataclass(frozen=True)
class SmoothedTarget:
    """What :func:`smoothed_target` computed."""

    q: Tensor
    floor: float
    closed_form: float
    p_gold: Tensor
    loss: Tensor
    best_p: float
    epsilon: float
    vocab_size: int
    gold: int
    pad_id: int | None


def _spread_rows(p_gold: Tensor, vocab_size: int, gold: int, pad_id: int | None) -> Tensor:
    """Log-probability rows (G, V): p on ``gold``, 0 on ``pad_id``, the rest shared evenly by the others."""
    n_others = vocab_size - 1 - (pad_id is not None)
    rows = ((1.0 - p_gold) / n_others)[:, None].expand(-1, vocab_size).clone()  # (G, V)
    rows[:, gold] = p_gold
    if pad_id is not None:
        rows[:, pad_id] = 0.0
    return rows.log()  # log 0 = -inf on the pad column, which the loss leaves out


def smoothed_target(epsilon: float = 0.1, vocab_size: int = 10, gold: int = 4, pad_id: int | None = 0,
                    grid: int = 200) -> SmoothedTarget:
    """The smoothed target distribution q of one position and the loss floor H(q) (section 5.4).

    Shape:
        ``q`` (V,); ``p_gold`` and ``loss`` (grid,).
    """
    check_number(epsilon, "epsilon", 0.0, 1.0, high_open=True, why=" (the label smoothing eps_ls; paper: 0.1)")
    check_int(vocab_size, "vocab_size", 3, at_most=1_000_000)
    check_int(gold, "gold", 0, below=vocab_size, why=f" (a token id of the vocabulary of V={vocab_size})")
    if pad_id is not None:
        check_int(pad_id, "pad_id", 0, below=vocab_size,
                  why=f" (a token id of the vocabulary of V={vocab_size}, or None)")
        if pad_id == gold:
            raise ValueError(f"gold={gold} is the pad id: padding is never a gold token (its loss is left out)")
    check_int(grid, "grid", 2, at_most=10_000)
    n_others = vocab_size - 1 - (pad_id is not None)
    q = torch.full((vocab_size,), epsilon / n_others, dtype=torch.float64)  # (V,)
    q[gold] = 1.0 - epsilon
    if pad_id is not None:
        q[pad_id] = 0.0
    target = torch.tensor([gold])
    floor = label_smoothed_nll(q.log()[None], target, epsilon, pad_id)[0].item()  # H(q, q) = H(q)
    closed_form = -(1 - epsilon) * math.log(1 - epsilon) - (epsilon * math.log(epsilon / n_others) if epsilon else 0.0)
    p_gold = torch.linspace(0.0, 1.0, grid + 2, dtype=torch.float64)[1:-1]  # (G,), both ends left out (log 0)
    loss = torch.stack([label_smoothed_nll(row[None], target, epsilon, pad_id)[0]
                        for row in _spread_rows(p_gold, vocab_size, gold, pad_id)])  # (G,)
    best = float(p_gold[loss.argmin()])
    return SmoothedTarget(q.float(), floor, closed_form, p_gold, loss, best, float(epsilon), vocab_size, gold, pad_id)


@figure_size(10.0, 3.6)
def draw_smoothed_target(fig: Figure | SubFigure, epsilon: float = 0.1, vocab_size: int = 10, gold: int = 4,
                         pad_id: int | None = 0, shown_tokens: int = 30) -> SmoothedTarget:
    """The target q as bars (the first ``shown_tokens`` ids) and the loss against p(gold): 2 axes."""
    check_figure(fig, "draw_smoothed_target")
    view = smoothed_target(epsilon, vocab_size, gold, pad_id)
    plain = smoothed_target(0.0, vocab_size, gold, pad_id) if epsilon else view
    shown = min(check_int(shown_tokens, "shown_tokens", 1), vocab_size)
    bar_ax, loss_ax = fig.subplots(1, 2)
    colors = ["C3" if i == gold else ("lightgray" if i == pad_id else "C0") for i in range(shown)]
    bar_ax.bar(range(shown), view.q[:shown].numpy(), color=colors)
    bar_ax.set_ylim(0, 1.05)
    bar_ax.set_xlabel("token id" + (f" (first {shown} of {vocab_size})" if shown < vocab_size else ""))
    bar_ax.set_ylabel("target probability q")
    other = epsilon / (vocab_size - 1 - (pad_id is not None))
    bar_ax.set_title(f"eps = {epsilon:g}, V = {vocab_size}: gold {1 - epsilon:.3g}, each other {other:.3g}",
                     fontsize=10)
    loss_ax.plot(plain.p_gold.numpy(), plain.loss.numpy(), color="gray", lw=1, ls="--", label="eps = 0: -ln p")
    loss_ax.plot(view.p_gold.numpy(), view.loss.numpy(), color="C0", lw=1.6, label=f"eps = {epsilon:g}")
    loss_ax.axhline(view.floor, color="C3", lw=1, ls=":", label=f"floor H(q) = {view.floor:.3f}")
    loss_ax.plot([view.best_p], [view.loss.min().item()], "o", color="C3")
    top = max(3.0, 1.3 * view.floor + 0.5)
    loss_ax.set_ylim(0, top)
    loss_ax.set_xlabel("probability the model gives the gold token")
    loss_ax.set_ylabel("loss per token")
    loss_ax.set_title(f"smallest at p = {view.best_p:.3f}", fontsize=10)
    loss_ax.legend(fontsize=8, loc="upper right")
    return view


@dataclass(frozen=True)
class WarmupSchedule:
    """What :func:`warmup_schedule` computed."""

    steps: np.ndarray
    lr: np.ndarray
    peak_step: int
    peak_lr: float
    formula_peak: float
    d_model: int
    warmup: int
    factor: float


def warmup_schedule(d_model: int = 512, warmup: int = 4000, factor: float = 1.0,
                    steps: int = 20_000) -> WarmupSchedule:
    """The paper's learning rate at every step from 1 to ``steps`` (section 5.3).

    Shape:
        ``steps`` and ``lr`` are (steps,).
    """
    check_int(d_model, "d_model", 1)
    check_int(warmup, "warmup", 1)
    check_number(factor, "factor", 0.0, low_open=True, why=" (the multiplier of the schedule; paper: 1)")
    check_int(steps, "steps", 1, at_most=1_000_000)
    step = np.arange(1, steps + 1)
    lr = np.array([transformer_lr(int(s), d_model, warmup, factor) for s in step])  # (S,)
    peak = int(lr.argmax())
    return WarmupSchedule(step, lr, peak + 1, float(lr[peak]), factor * (d_model * warmup) ** -0.5, d_model, warmup,
                          float(factor))


@figure_size(7.0, 3.6)
def draw_warmup_schedule(fig: Figure | SubFigure, d_model: int = 512, warmup: int = 4000, factor: float = 1.0,
                         steps: int = 20_000, reference: bool = True) -> WarmupSchedule:
    """The learning-rate curve with its peak marked; with ``reference``, the paper's curve thin and grey: 1 axes."""
    check_figure(fig, "draw_warmup_schedule")
    view = warmup_schedule(d_model, warmup, factor, steps)
    ax = fig.subplots()
    if reference and (d_model, warmup, factor) != (512, 4000, 1.0):
        paper = warmup_schedule(512, 4000, 1.0, steps)
        ax.plot(paper.steps, paper.lr, color="gray", lw=1, ls="--", label="paper: d_model 512, warmup 4000")
    ax.plot(view.steps, view.lr, color="C0", lw=1.6, label=f"d_model {d_model}, warmup {warmup}, factor {factor:g}")
    ax.plot([view.peak_step], [view.peak_lr], "o", color="C3")
    ax.annotate(f"peak {view.peak_lr:.2e}\nat step {view.peak_step:,}", (view.peak_step, view.peak_lr),
                xytext=(8, -4), textcoords="offset points", va="top", fontsize=9)
    ax.set_ylim(0, 1.25 * max(view.peak_lr, ax.get_ylim()[1] / 1.25))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return view
