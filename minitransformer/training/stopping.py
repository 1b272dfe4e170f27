"""When a run stops: its epochs, its step limit, its time budget or its quality target, and the rule in words.

:class:`.trainer.Trainer` asks these while it trains (and prints :func:`stop_rule` when it starts);
``python -m minitransformer train --resume`` asks :func:`finished_reason` of a checkpoint before it
builds anything, to say that a finished run has nothing left to train.
"""

from __future__ import annotations

import math
from typing import Any

from .cpu import duration
from .options import TrainOptions


def finished_reason(options: TrainOptions, step: int, epoch: int, batches_done: int, metrics: dict[str, Any],
                    metric: str) -> str | None:
    """Why a run at this point has nothing left to train (None: it has)."""
    o = options
    if o.max_steps is not None and step >= o.max_steps:
        return f"it reached --max-steps {o.max_steps}"
    planned = metrics.get("planned_steps")
    if o.minutes is not None and (planned is not None and step >= planned
                                  or metrics.get("train_seconds", 0.0) >= 60 * o.minutes):
        return (f"it used its --minutes {o.minutes:g} budget ({step:,} steps; a longer budget is a new run, as its "
                "learning rate was planned to end with this one)")
    if o.epochs is not None and epoch >= o.epochs and batches_done == 0:
        return f"it trained the {o.epochs} epochs of --epochs"
    reached = metrics.get("val_" + metric, -math.inf)
    if o.target is not None and o.target > 0 and reached >= o.target:
        return f"validation {_metric_text(metric, reached)} reached --target {o.target:g}"
    return None


def _metric_text(metric: str, value: float) -> str:
    return f"exact match {100 * value:.1f}%" if metric == "exact_match" else f"BLEU {value:.2f}"


def check_steps(options: TrainOptions, steps_per_epoch: int) -> set[int]:
    """Steps into an epoch (1-based) after which the quality target is checked, the epoch's end aside.

    Empty without a target or with ``checks_per_epoch`` of 1 (or None): then only epoch ends.
    """
    o = options
    n, total = o.checks_per_epoch or 1, steps_per_epoch
    if o.target is None or o.target <= 0 or n <= 1:
        return set()
    return {round(k * total / n) for k in range(1, n)} - {0, total}


def stop_rule(options: TrainOptions, metric: str, steps_per_epoch: int) -> str:
    """When training stops, in words: "for at most 8 epochs (864 steps); earlier once ..."."""
    o = options
    if o.minutes is not None:
        ends = " and decays the learning rate to zero at the planned end" if o.lr_schedule == "linear_decay" else ""
        text = (f"for {o.minutes:g} minutes, validation and checkpoints included: it times its first steps, plans "
                f"the steps that fit{ends}, and plans again as its speed changes")
        if o.max_steps is not None:
            text += f"; --max-steps stops it at step {o.max_steps:,} if that comes first"
        return text + _target_text(options, metric, steps_per_epoch)
    limits = []
    if o.epochs is not None:
        limits.append(f"{o.epochs} epoch{'s' if o.epochs != 1 else ''} ({o.epochs * steps_per_epoch:,} steps)")
    if o.max_steps is not None:
        limits.append(f"{o.max_steps:,} steps")
    if o.time_budget is not None:
        limits.append(f"{duration(o.time_budget)} (--time-budget)")
    text = "for at most " + " or ".join(limits) if limits else "without a limit"
    return text + _target_text(options, metric, steps_per_epoch)


def _target_text(options: TrainOptions, metric: str, steps_per_epoch: int) -> str:
    o, text = options, ""
    if o.target is not None and o.target > 0:
        goal = f"{100 * o.target:g}% exact match" if metric == "exact_match" else f"BLEU {o.target:g}"
        checks = check_steps(options, steps_per_epoch)
        when = "after each epoch" if not checks else \
            f"{len(checks) + 1} times per epoch (every ~{steps_per_epoch // (len(checks) + 1)} steps)"
        text += f"; it stops earlier once the validation set reaches {goal}, checked {when}"
    return text
