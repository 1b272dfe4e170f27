"""Training in a time budget, ``train --minutes N``: the speed estimate, the plan, a machine that slows down,
resuming inside a budget, and the flag. No test times anything: the runs read a fake clock that moves only
when a step or a validation runs, by as much as the test says."""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from minitransformer.cli import _given_train_arguments, main
from minitransformer.training import TrainOptions, Trainer, load_checkpoint, read_log, train
from minitransformer.training.budget import (SKIP, TimeBudget, plan_steps, run_seconds, step_seconds, validations,
                                             worth_replanning)
from minitransformer.training.schedule import transformer_lr
from minitransformer.training.stopping import stop_rule

from test_training import TINY

# 400 dates make ~27 steps an epoch: a budget of a few fake seconds holds a few epochs.
TIMED = {**TINY, "train_size": 400, "eval_sentences": 4, "log_every": 5, "test_beam": 1}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")


# --- the estimate and the plan, as pure functions ------------------------------------------------
def test_the_step_time_leaves_out_the_first_steps_and_follows_the_recent_ones() -> None:
    assert step_seconds([]) is None and step_seconds([9.0] * SKIP) is None
    assert step_seconds([9.0, 5.0, 1.0, 1.0, 1.0]) == pytest.approx(1.0)  # the slow start is left out
    slowing = [0.1] * 100 + [0.2] * 60
    assert step_seconds(slowing, window=50) == pytest.approx(0.2)  # the last 50 steps only
    assert step_seconds(slowing[:120], window=50) == pytest.approx((30 * 0.1 + 20 * 0.2) / 50)


def test_validations_are_counted_at_epoch_ends_and_at_the_checks_inside() -> None:
    assert validations(0, 25, 0, 10, [10]) == 2  # after steps 10 and 20
    assert validations(0, 25, 0, 10, [5, 10]) == 5  # 5, 10, 15, 20, 25
    assert validations(7, 24, 3, 10, [10]) == 2  # the epoch began after step 4: its ends are 14 and 24
    assert validations(24, 24, 0, 10, [10]) == 0


def test_the_plan_is_the_last_step_whose_steps_and_validations_fit() -> None:
    where = dict(into_epoch=0, steps_per_epoch=100, offsets=[100])
    # 540 steps of 0.1 s, 5 validations on the way and one at the end, 1 s each: exactly 60 s
    assert run_seconds(540, 0.1, 1.0, 0, **where) == pytest.approx(60.0)
    assert plan_steps(0, 60.0, 0.1, 1.0, **where) == 540
    assert run_seconds(500, 0.1, 1.0, 0, **where) == pytest.approx(55.0)  # the last step is an epoch's end
    for step, left, per_step, per_eval, into in [(0, 60.0, 0.1, 1.0, 0), (130, 33.3, 0.07, 2.5, 30),
                                                 (10, 5.0, 0.3, 0.0, 10), (3, 0.5, 0.1, 1.0, 3)]:
        where = dict(into_epoch=into, steps_per_epoch=100, offsets=[50, 100])
        end = plan_steps(step, left, per_step, per_eval, **where)
        assert end >= step
        if end > step or run_seconds(0, per_step, per_eval, step, **where) <= left:
            assert run_seconds(end - step, per_step, per_eval, step, **where) <= left + 1e-9
        assert run_seconds(end + 1 - step, per_step, per_eval, step, **where) > left  # one more does not fit
    assert plan_steps(40, 0.5, 0.1, 1.0, **where) == 40  # not even the final validation fits: stop now


def test_a_new_plan_is_taken_only_when_it_moves_the_end_beyond_noise() -> None:
    assert not worth_replanning(1000, 1002, 0) and not worth_replanning(1000, 1019, 0)  # 2% of 1,000 left
    assert worth_replanning(1000, 1021, 0) and worth_replanning(1000, 979, 0)
    assert worth_replanning(100, 97, 95) and not worth_replanning(100, 98, 95)  # near the end: 2 steps


def test_the_budget_clock_counts_what_an_earlier_invocation_used() -> None:
    now = [100.0]
    budget = TimeBudget(60.0, used=20.0, clock=lambda: now[0])
    now[0] += 1.5
    budget.step_done()
    now[0] += 4.0
    budget.eval_done(4.0)
    now[0] += 0.5
    budget.step_done()
    assert budget.used() == pytest.approx(26.0) and budget.durations == pytest.approx([1.5, 0.5])
    assert budget.eval_seconds == 4.0 and not budget.ready()


# --- whole runs on a fake clock -------------------------------------------------------------------
class FakeClock:
    """Seconds that pass only when a step or a validation runs."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _timed(monkeypatch: pytest.MonkeyPatch, step_time: Callable[[int], float], eval_time: float = 0.5,
           clock: FakeClock | None = None, on_step: Callable[[int], None] | None = None) -> FakeClock:
    """Make train() read a fake clock: update k costs ``step_time(k)`` seconds, each validation ``eval_time``."""
    clock = clock or FakeClock()
    original_step, original_quality = Trainer.train_step, Trainer.validation_quality

    def step(self: Trainer, *args: Any) -> Any:
        clock.now += step_time(self.step + 1)
        if on_step is not None:
            on_step(self.step + 1)
        return original_step(self, *args)

    def quality(self: Trainer) -> float:
        clock.now += eval_time
        return original_quality(self)

    monkeypatch.setattr(Trainer, "clock", staticmethod(clock))
    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(Trainer, "validation_quality", quality)
    return clock


def _options(out: Path, **changes: Any) -> TrainOptions:
    return TrainOptions(**{**TIMED, "out": str(out), **changes})


def _events(out: Path, event: str) -> list[dict[str, Any]]:
    return [r for r in read_log(out / "log.jsonl") if r["event"] == event]


def _check_ends_on_plan(out: Path, result: Any, budget: float) -> None:
    """The run stopped at its last plan, inside the budget, with the rate at zero after its last update."""
    plans, rates = _events(out, "plan"), {r["step"]: r["lr"] for r in _events(out, "train")}
    assert result.step == plans[-1]["planned_steps"] == result.metrics["planned_steps"]
    assert 0.9 * budget < result.metrics["train_seconds"] <= budget
    peak = transformer_lr(TIMED["warmup"], TIMED["d_model"], TIMED["warmup"], TIMED["lr_factor"])
    assert rates[result.step] == 0.0  # the rate the next update would get
    last = [r["lr"] for r in _events(out, "train") if r["step"] == result.step - 1]
    assert all(0 < lr < 0.1 * peak for lr in last)


def test_a_run_plans_from_its_first_steps_and_ends_on_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first two steps are slow (warm-up effects), which the plan must not count.
    _timed(monkeypatch, lambda k: 1.0 if k <= 2 else 0.05)
    result = train(_options(tmp_path, minutes=0.1))
    plans = _events(tmp_path, "plan")
    assert plans[0]["step"] == SKIP + 8 and plans[0]["step_seconds"] == pytest.approx(0.05)
    assert plans[0]["eval_seconds"] is None or plans[0]["eval_seconds"] > 0
    _check_ends_on_plan(tmp_path, result, 6.0)
    setup = _events(tmp_path, "setup")[0]
    assert setup["options"]["minutes"] == 0.1 and setup["options"]["lr_schedule"] == "linear_decay"
    assert setup["options"]["epochs"] is None and setup["options"]["target"] is None  # the recipe's are dropped


def test_a_machine_that_slows_down_gets_a_shorter_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _timed(monkeypatch, lambda k: 0.05 if k <= 40 else 0.1)  # twice as slow from step 41 on
    result = train(_options(tmp_path, minutes=0.15))
    plans = _events(tmp_path, "plan")
    early = [p for p in plans if p["step"] <= 40][-1]
    assert early["step_seconds"] == pytest.approx(0.05)
    assert plans[-1]["planned_steps"] < early["planned_steps"]  # the plan shrank
    assert plans[-1]["step_seconds"] > 0.075  # moving to 0.1 as the slow steps fill the window
    _check_ends_on_plan(tmp_path, result, 9.0)
    # The rate never jumps at a re-plan: it rises during the warm-up, then only falls.
    rates = [r["lr"] for r in _events(tmp_path, "train")]
    top = rates.index(max(rates))
    assert rates[: top + 1] == sorted(rates[: top + 1]) and rates[top:] == sorted(rates[top:], reverse=True)


def test_a_machine_that_speeds_up_gets_a_longer_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _timed(monkeypatch, lambda k: 0.1 if k <= 30 else 0.05)
    result = train(_options(tmp_path, minutes=0.15))
    plans = _events(tmp_path, "plan")
    assert plans[-1]["planned_steps"] > plans[0]["planned_steps"]
    _check_ends_on_plan(tmp_path, result, 9.0)


@pytest.mark.parametrize("interruption", ["max_steps", "signal"])
def test_a_resumed_run_spends_what_is_left_of_its_budget(interruption: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupt(step: int) -> None:
        if interruption == "signal" and step == 25:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: the run stops after this step, with a checkpoint

    first_clock = _timed(monkeypatch, lambda k: 0.05, on_step=interrupt)
    first = train(_options(tmp_path, minutes=0.1, max_steps=25 if interruption == "max_steps" else None))
    assert first.step in (25, 26) and first.interrupted == (interruption == "signal")
    spent = load_checkpoint(first.checkpoint)["metrics"]["train_seconds"]
    assert spent == pytest.approx(first_clock.now)  # every second of the first part, validations included
    planned = load_checkpoint(first.checkpoint)["metrics"]["planned_steps"]
    assert planned > first.step  # the plan was not used up

    second_clock = _timed(monkeypatch, lambda k: 0.05, clock=FakeClock(start=1000.0))
    second = train(_options(tmp_path, minutes=0.1, resume="auto"))
    assert second.metrics["train_seconds"] == pytest.approx(spent + second_clock.now - 1000.0)
    _check_ends_on_plan(tmp_path, second, 6.0)
    steps = [r["step"] for r in _events(tmp_path, "train")]
    assert steps == sorted(set(steps)) and steps[-1] == second.step  # one run, resumed where it stopped
    assert all(p["eval_seconds"] == 0.5 for p in _events(tmp_path, "plan")[1:])  # known again after resuming
    # A run that used its budget has nothing left to train.
    again = train(_options(tmp_path, minutes=0.1, resume="auto"))
    assert again.step == second.step


def test_linear_decay_with_max_steps_reaches_zero_at_the_last_step_without_timing(tmp_path: Path) -> None:
    result = train(_options(tmp_path, lr_schedule="linear_decay", max_steps=30, log_every=1, target=0))
    rates = {r["step"]: r["lr"] for r in _events(tmp_path, "train")}
    peak = transformer_lr(10, 16, 10, 1.0)
    assert result.step == 30 and rates[30] == 0.0 and rates[10] == pytest.approx(peak * 20 / 21)
    assert rates[29] == pytest.approx(peak / 21) and not _events(tmp_path, "plan")


def test_runs_without_minutes_keep_their_schedule_and_stop_rule() -> None:
    assert TrainOptions().resolved().lr_schedule == "inverse_sqrt"
    assert TrainOptions(minutes=5).resolved().lr_schedule == "linear_decay"
    assert TrainOptions(minutes=5, lr_schedule="inverse_sqrt").resolved().lr_schedule == "inverse_sqrt"  # an ablation's
    plain, timed = TrainOptions().resolved(), TrainOptions(minutes=5).resolved()
    assert (plain.epochs, plain.target) == (8, 1.0) and (timed.epochs, timed.target) == (None, None)
    assert TrainOptions(minutes=5, target=0.9).resolved().target == 0.9  # a target given stops it early
    # A plain time budget is a limit of its own, said with the others (once "without a step limit")
    assert stop_rule(TrainOptions(dataset="multi30k", device="cpu", time_budget=78.4).resolved(), "bleu", 36) \
        .startswith("for at most 78 s (--time-budget)")
    assert stop_rule(TrainOptions(epochs=3, time_budget=600).resolved(), "exact_match", 12) \
        .startswith("for at most 3 epochs (36 steps) or 10 min (--time-budget)")
    assert stop_rule(TrainOptions(epochs=1).resolved(), "exact_match", 12).startswith("for at most 1 epoch (12 steps)")


# --- bad input and the flag -------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "message"), [
    (dict(minutes=0), r"minutes must be a positive number of minutes of training \(e.g. 30\), got 0"),
    (dict(minutes=-2.5), r"minutes must be a positive .* got -2.5"),
    (dict(minutes=math.nan), r"minutes must be a positive .* got nan"),
    (dict(minutes=math.inf), r"minutes must be a positive .* got inf"),
    (dict(minutes=30, time_budget=600), r"minutes and time_budget are two time limits .* got minutes=30 and "
                                        + r"time_budget=600"),
    (dict(minutes=30, epochs=10), r"give minutes or epochs, not both .* got minutes=30 and epochs=10"),
])
def test_a_budget_that_is_not_one_is_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainOptions(**changes)
    with pytest.raises(TypeError, match="minutes must be a number or None, got str '30'"):
        TrainOptions(minutes="30")


@pytest.mark.parametrize(("args", "message"), [
    (["--minutes", "0"], r"minutes must be a positive number of minutes .* got 0"),
    (["--minutes", "5", "--epochs", "3"], r"give minutes or epochs, not both"),
])
def test_the_flag_refuses_a_bad_budget_in_one_line(args: list[str], message: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


def test_the_flag_trains_in_a_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _given_train_arguments(["--minutes", "1.5"]) == {"minutes": 1.5}
    args = ["--train-size", "60", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
            "--eval-sentences", "4", "--test-beam", "1", "--show", "0", "--log-every", "2"]
    assert main(["train", *args, "--minutes", "0.05", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "training for 0.05 minutes" in out and re.search(r"trained [\d,]+ steps in [\d.]+ s of the", out)
    assert re.search(r"test, greedy: .* \([\d.]+ s, after the training budget\)", out)
    assert _events(tmp_path, "setup")[0]["options"]["minutes"] == 0.05


@pytest.mark.parametrize("schedule", ["linear_decay", "inverse_sqrt"])
def test_a_decay_to_zero_hands_on_its_final_weights_whatever_validation_says(
        schedule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Validation falls at every check. A run whose rate decays to zero at its end still tests and keeps its final
    # weights (between its last epochs a small validation differs by noise); a run on the paper's schedule, which
    # has no planned end, tests its best epoch, as it always has.
    falling = iter(range(100, 0, -1))
    monkeypatch.setattr(Trainer, "validation_quality", lambda self: float(next(falling)))
    result = train(_options(tmp_path, lr_schedule=schedule, epochs=3, target=0))
    ends = [r["step"] for r in _events(tmp_path, "epoch")]
    assert result.step == ends[-1] and len(ends) == 3
    kept = ends[-1] if schedule == "linear_decay" else ends[0]
    assert load_checkpoint(tmp_path / "best.pt")["step"] == kept == result.metrics["best_step"]
    assert ("best on validation" in capsys.readouterr().out) == (schedule == "inverse_sqrt")
