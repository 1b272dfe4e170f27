"""The warm-up schedule of section 5.3."""

from __future__ import annotations

import math

import pytest
import torch

from minitransformer.training import WarmupInverseSqrt, transformer_lr, transformer_scheduler
from minitransformer.training.schedule import LinearDecayToZero, planned_schedule


def test_peak_at_warmup_with_the_papers_value() -> None:
    d_model, warmup = 512, 4000
    rates = [transformer_lr(s, d_model, warmup) for s in range(1, 20_001)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == warmup
    assert math.isclose(max(rates), d_model**-0.5 * warmup**-0.5, rel_tol=1e-12)


def test_linear_warmup_then_inverse_square_root_decay() -> None:
    d_model, warmup, factor = 64, 100, 2.0
    lr = lambda s: transformer_lr(s, d_model, warmup, factor)  # noqa: E731
    for s in (1, 10, 50, 99):
        assert math.isclose(lr(s), s * lr(1), rel_tol=1e-12)  # proportional to the step
    for s in (100, 400, 1600):
        assert math.isclose(lr(4 * s), lr(s) / 2, rel_tol=1e-12)  # 4x the steps, half the rate
    assert math.isclose(lr(1), factor * d_model**-0.5 * warmup**-1.5, rel_tol=1e-12)


def test_scheduler_gives_the_optimizer_the_schedule_and_restores_from_state() -> None:
    param = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.Adam([param], lr=123.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = transformer_scheduler(optimizer, d_model=32, warmup=10, factor=1.5)
    seen = []
    for _ in range(25):
        seen.append(optimizer.param_groups[0]["lr"])
        param.grad = torch.ones(3)
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([transformer_lr(s, 32, 10, 1.5) for s in range(1, 26)], rel=1e-12)
    state = scheduler.state_dict()
    assert state["lr_lambdas"][0] == {"d_model": 32, "warmup": 10, "factor": 1.5}
    other_opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))])
    other = transformer_scheduler(other_opt, d_model=32, warmup=10, factor=1.5)
    other_opt.load_state_dict(optimizer.state_dict())
    other.load_state_dict(state)
    assert other.get_last_lr() == scheduler.get_last_lr()


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="counts optimizer updates from 1"):
        transformer_lr(0, 512, 4000)
    with pytest.raises(ValueError, match="warmup >= 1"):
        WarmupInverseSqrt(512, 0)


def _rates(multiplier: LinearDecayToZero, last: int) -> list[float]:
    """The rates of updates 1..last (LambdaLR asks for index k - 1 before update k)."""
    return [multiplier(k - 1) for k in range(1, last + 1)]


def test_linear_decay_warms_up_as_the_paper_peaks_at_warmup_and_reaches_zero_at_the_planned_end() -> None:
    d_model, warmup, factor, total = 64, 10, 0.5, 50
    rates = _rates(LinearDecayToZero(d_model, warmup, factor, total=total), total + 5)
    peak = transformer_lr(warmup, d_model, warmup, factor)
    assert rates[:warmup] == pytest.approx([transformer_lr(k, d_model, warmup, factor) for k in range(1, warmup + 1)],
                                           rel=1e-12)
    assert max(rates) == pytest.approx(peak, rel=1e-12) and rates.index(max(rates)) + 1 == warmup
    # A straight line from the peak at update `warmup` to zero one update after the last, then zero.
    line = [peak * (total + 1 - k) / (total + 1 - warmup) for k in range(warmup, total + 1)]
    assert rates[warmup - 1 : total] == pytest.approx(line, rel=1e-12)
    assert 0 < rates[total - 1] <= peak / (total - warmup) and rates[total:] == [0.0] * 5


def test_without_a_plan_the_rate_holds_its_peak_and_a_short_plan_turns_halfway() -> None:
    unplanned = LinearDecayToZero(64, 10)
    assert _rates(unplanned, 30)[9:] == pytest.approx([transformer_lr(10, 64, 10)] * 21, rel=1e-12)
    short = _rates(LinearDecayToZero(64, 10, total=9), 12)  # shorter than its warm-up
    assert short[:5] == pytest.approx([transformer_lr(k, 64, 10) for k in range(1, 6)], rel=1e-12)  # the same ramp
    assert max(short) == short[4] and short[9:] == [0.0] * 3 and all(a > b for a, b in zip(short[4:9], short[5:9]))


@pytest.mark.parametrize("done", [4, 20, 35])  # warming up, decaying, near the end
@pytest.mark.parametrize("new_total", [30, 45, 80])
def test_a_new_plan_keeps_the_rate_continuous_and_reaches_zero_at_its_end(done: int, new_total: int) -> None:
    if new_total < done:
        return
    schedule = LinearDecayToZero(64, 10, total=45)
    before = _rates(schedule, done + 1)
    schedule.replan(new_total, done)
    after = _rates(schedule, new_total + 3)
    peak = transformer_lr(10, 64, 10)
    assert after[done] == pytest.approx(before[done], rel=1e-12)  # the next update gets the rate it had
    assert after[new_total - 1] > 0 and after[new_total:] == [0.0] * 3
    # no jump: each step moves the rate by at most the steepest slope of either plan
    slope = max(peak / 10, before[done] / max(new_total + 1 - (done + 1), 1))
    assert max(abs(a - b) for a, b in zip(after[done:], after[done + 1 :])) <= slope * (1 + 1e-9)
    with pytest.raises(ValueError, match="cannot end before the updates already done: total=3, done=5"):
        schedule.replan(3, 5)


@pytest.mark.parametrize("done", [4, 10, 20, 35])  # warming up, at the peak, decaying, near the end
def test_two_plans_at_one_step_keep_the_rate_where_it_was(done: int) -> None:
    # A timed run plans at a log step and again after the validation of the same step (an epoch's end); the
    # second plan once took the update for one still warming up and lifted the rate to done / warmup peaks.
    schedule = LinearDecayToZero(64, 10, total=45)
    before = _rates(schedule, done + 1)
    schedule.replan(47, done)
    schedule.replan(44, done)
    after = _rates(schedule, 48)
    assert after[done] == pytest.approx(before[done], rel=1e-12)
    assert max(after[done:]) <= transformer_lr(10, 64, 10) * (1 + 1e-12)  # from here on, never above the peak
    assert after[43] > 0 and after[44:] == [0.0] * 4


def test_the_plan_is_kept_in_the_schedulers_state_and_a_restored_one_goes_on_alike() -> None:
    def scheduler() -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
        optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))])
        return optimizer, transformer_scheduler(optimizer, 32, warmup=5, factor=1.0, schedule="linear_decay")

    optimizer, first = scheduler()
    for step in range(1, 13):
        optimizer.step()
        first.step()
        if step == 8:
            planned_schedule(first).replan(30, done=8)
    _, second = scheduler()
    second.load_state_dict(first.state_dict())
    assert planned_schedule(second).total == 30 and second.get_last_lr() == first.get_last_lr()
    assert _rates(planned_schedule(second), 31) == _rates(planned_schedule(first), 31)
    assert planned_schedule(transformer_scheduler(optimizer, 32, 5)) is None  # the paper's has no planned end
