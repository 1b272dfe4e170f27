"""Training in a time budget, ``train --minutes N`` (lesson 07; docs/training.md, "Training in a time budget").

The run times its own steps and validations, plans the number of steps that fit in what is left of the budget,
and plans again as the machine's speed changes; :class:`.schedule.LinearDecayToZero` bends the learning rate
to each plan, so that it reaches zero when the time is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

#: Steps of each invocation left out of the timing: they pay one-off costs (memory, the thread pool, caches).
SKIP = 2
#: Steps timed, after those, before the first plan.
MEASURE = 8
#: The step time is the mean of this many recent steps: enough to even out long and short batches, few
#: enough to follow a machine that slows down within a minute or two.
WINDOW = 50


def step_seconds(durations: Sequence[float], skip: int = SKIP, window: int = WINDOW) -> float | None:
    """Seconds per step: the mean of the last ``window`` durations, the first ``skip`` left out (None: none left)."""
    timed = durations[max(skip, len(durations) - window):]
    return sum(timed) / len(timed) if timed else None


def validations(start: int, end: int, into_epoch: int, steps_per_epoch: int, offsets: Sequence[int]) -> int:
    """Validations after step ``start`` up to step ``end`` included, ``start`` being ``into_epoch`` steps into
    its epoch: one at each of ``offsets`` steps into every epoch (its last step among them)."""
    first = start - into_epoch  # the step before the epoch began

    def upto(step: int) -> int:
        whole, rest = divmod(step - first, steps_per_epoch)
        return whole * len(offsets) + sum(1 for o in offsets if o <= rest)
    return upto(end) - upto(start)


def run_seconds(steps: int, step_seconds: float, eval_seconds: float, step: int, into_epoch: int,
                steps_per_epoch: int, offsets: Sequence[int]) -> float:
    """Seconds to train ``steps`` more steps from ``step``: the steps, the validations on the way and one at the end
    (unless the last step is a validation's)."""
    count = validations(step, step + steps, into_epoch, steps_per_epoch, offsets)
    at_end = steps > 0 and count > validations(step, step + steps - 1, into_epoch, steps_per_epoch, offsets)
    return steps * step_seconds + (count + (0 if at_end else 1)) * eval_seconds


def plan_steps(step: int, seconds_left: float, step_seconds: float, eval_seconds: float, into_epoch: int,
               steps_per_epoch: int, offsets: Sequence[int]) -> int:
    """The last step whose training and validations (see :func:`run_seconds`) fit in ``seconds_left``.

    ``step`` itself when not even the final validation fits: the run stops now.
    """
    where = (step, into_epoch, steps_per_epoch, offsets)
    low, high = 0, int(seconds_left / max(step_seconds, 1e-9)) + 1  # low fits (or is 0), high does not
    while high - low > 1:  # the cost only grows with the steps: bisect
        middle = (low + high) // 2
        fits = run_seconds(middle, step_seconds, eval_seconds, *where) <= seconds_left
        low, high = (middle, high) if fits else (low, middle)
    return step + low


def worth_replanning(planned: int, new: int, step: int) -> bool:
    """True when a new plan moves the end by more than noise: 2 steps, or 2% of the steps left."""
    return abs(new - planned) > max(2, (planned - step) // 50)


class TimeBudget:
    """The clock of a run in a time budget: seconds used (kept across ``--resume``), step and validation times."""

    def __init__(self, seconds: float, used: float = 0.0, eval_seconds: float | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.seconds, self.clock = seconds, clock
        self.origin = clock() - used  # the budget counts what earlier invocations of the run used
        self.mark = clock()  # the end of the last step or validation
        self.durations: list[float] = []
        self.eval_seconds = eval_seconds  # the last validation's, with its checkpoint

    def used(self) -> float:
        return self.clock() - self.origin

    def step_done(self) -> None:
        """Time the step that just ended: everything since the last step or validation."""
        now = self.clock()
        self.durations.append(now - self.mark)
        self.mark = now

    def eval_done(self, seconds: float) -> None:
        """A validation (and its checkpoint) took ``seconds``; the next step's time starts now."""
        self.eval_seconds = seconds
        self.mark = self.clock()

    def ready(self) -> bool:
        """True once enough steps are timed for a plan."""
        return len(self.durations) >= SKIP + MEASURE
