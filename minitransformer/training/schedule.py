"""The learning-rate schedule of the paper (section 5.3; lesson 07): linear warm-up, then inverse square root decay.

lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), peaking at step = warmup.
:class:`LinearDecayToZero` keeps the warm-up and its peak but ends at zero on a planned step (``train --minutes``).
"""

from __future__ import annotations

import math

import torch
from torch.optim.lr_scheduler import LambdaLR


def transformer_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's learning rate at optimizer step ``step`` (counted from 1)."""
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class WarmupInverseSqrt:
    """Picklable multiplier for ``LambdaLR``: update k (0-based) gets ``transformer_lr(k + 1)``.

    A small class rather than a lambda so that ``LambdaLR.state_dict`` stores its numbers
    (d_model, warmup, factor) and a checkpoint restores them.
    """

    def __init__(self, d_model: int, warmup: int, factor: float = 1.0) -> None:
        if d_model < 1 or warmup < 1 or not factor > 0 or not math.isfinite(factor):
            raise ValueError(
                f"expected d_model >= 1, warmup >= 1 and a positive finite factor, got "
                f"d_model={d_model}, warmup={warmup}, factor={factor}"
            )
        self.d_model = d_model
        self.warmup = warmup
        self.factor = factor

    def __call__(self, index: int) -> float:
        # LambdaLR asks for index 0 before the first update; the paper's steps start at 1.
        return transformer_lr(index + 1, self.d_model, self.warmup, self.factor)


#: Learning-rate schedules of :func:`transformer_scheduler` (``TrainOptions.lr_schedule``).
LR_SCHEDULES = ("inverse_sqrt", "constant", "decay_only", "linear_decay")


class ConstantAtPeak:
    """Picklable multiplier for ``LambdaLR``: the paper's peak rate at every step, no warm-up.

    The rate is ``transformer_lr(warmup, d_model, warmup, factor)`` = factor * d_model^-0.5 *
    warmup^-0.5, the top of the warm-up schedule, from the first update on: the "no warm-up"
    ablation of lesson 10 (Xiong et al., 2020: post-LN needs the warm-up, pre-LN much less).
    """

    def __init__(self, d_model: int, warmup: int, factor: float = 1.0) -> None:
        WarmupInverseSqrt(d_model, warmup, factor)  # the same checks
        self.d_model = d_model
        self.warmup = warmup
        self.factor = factor

    def __call__(self, index: int) -> float:
        return transformer_lr(self.warmup, self.d_model, self.warmup, self.factor)


class DecayWithoutWarmup(ConstantAtPeak):
    """Picklable multiplier for ``LambdaLR``: the paper's decay without its warm-up.

    The rate is the schedule's peak for the first ``warmup`` steps, then the paper's
    factor * d_model^-0.5 * step^-0.5 decay: ``transformer_lr(max(step, warmup), ...)``. It
    differs from the paper's schedule only in the first ``warmup`` steps (no linear ramp), so
    an ablation with it measures the warm-up alone; :class:`ConstantAtPeak` removes the decay too.
    """

    def __call__(self, index: int) -> float:
        return transformer_lr(max(index + 1, self.warmup), self.d_model, self.warmup, self.factor)


class LinearDecayToZero(ConstantAtPeak):
    """Picklable multiplier for ``LambdaLR``: the paper's warm-up, then a straight line to zero after update ``total``.

    With a fixed number of steps, a linear decay to zero trains better than the paper's slow 1/sqrt(step)
    tail (Li et al., 2020, "Budgeted training"; Bergsma et al., 2025, "Straight to zero"). The peak is the
    paper's, factor * d_model^-0.5 * warmup^-0.5, so ``factor`` and ``warmup`` keep their meaning. ``total``
    may be unknown at first (the rate then stays at the peak after the warm-up) and may change while
    training (:meth:`replan`); it is kept in ``LambdaLR.state_dict``, so a resumed run follows the same plan.
    """

    def __init__(self, d_model: int, warmup: int, factor: float = 1.0, total: int | None = None) -> None:
        super().__init__(d_model, warmup, factor)
        self.total: int | None = None
        # The line to zero passes through this point (update, fraction of the peak): the top of the
        # warm-up until a re-plan moves it to where the rate stands then, so the rate never jumps.
        self.knee_step, self.knee_value = float(warmup), 1.0
        if total is not None:
            self.replan(total, done=0)

    def fraction(self, step: int) -> float:
        """The rate of update ``step`` (from 1) as a fraction of the peak."""
        ramp = step / self.warmup
        if self.total is None:
            return min(ramp, 1.0)
        end = self.total + 1  # the rate reaches zero one update after the last one
        if step >= end:
            return 0.0
        return min(ramp, self.knee_value * (end - step) / max(end - self.knee_step, 1e-9))

    def replan(self, total: int, done: int) -> None:
        """Reach zero after update ``total`` instead, ``done`` updates into the run, with no jump in the rate."""
        if total < done:
            raise ValueError(f"a plan cannot end before the updates already done: total={total}, done={done}")
        nxt = done + 1
        if nxt <= min(self.knee_step, self.warmup):  # not "<= knee_step": a second plan at one step is past it
            # Still warming up: the ramp goes on to its top, or to the middle of a plan too short for it.
            self.knee_step = max(nxt, min(self.warmup, (total + 1) / 2))
            self.knee_value = self.knee_step / self.warmup
        else:
            self.knee_step, self.knee_value = nxt, self.fraction(nxt)
        self.total = total

    def __call__(self, index: int) -> float:
        return super().__call__(index) * self.fraction(index + 1)


def planned_schedule(scheduler: LambdaLR) -> LinearDecayToZero | None:
    """The multiplier of ``scheduler`` that ends on a planned step, or None for the other schedules."""
    found = scheduler.lr_lambdas[0]
    return found if isinstance(found, LinearDecayToZero) else None


def transformer_scheduler(
    optimizer: torch.optim.Optimizer, d_model: int, warmup: int = 4000, factor: float = 1.0,
    schedule: str = "inverse_sqrt",
) -> LambdaLR:
    """A ``LambdaLR`` that gives the optimizer the paper's learning rate at every step.

    Sets each parameter group's base learning rate to 1, so the group's ``lr`` is exactly
    the schedule's value. Call ``scheduler.step()`` after each ``optimizer.step()``.
    """
    if schedule not in LR_SCHEDULES:
        raise ValueError(f"schedule must be one of {LR_SCHEDULES}, got {schedule!r}")
    kinds = {"inverse_sqrt": WarmupInverseSqrt, "constant": ConstantAtPeak, "decay_only": DecayWithoutWarmup,
             "linear_decay": LinearDecayToZero}
    multiplier = kinds[schedule](d_model, warmup, factor)
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group.pop("initial_lr", None)
    return LambdaLR(optimizer, multiplier)
