"""The warm-up schedule of section 5.3."""

from __future__ import annotations

import math

import pytest
import torch

from minitransformer.training import WarmupInverseSqrt, transformer_lr, transformer_scheduler


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
