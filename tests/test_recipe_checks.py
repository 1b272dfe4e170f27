"""The checks of exercise 10: right answers pass, the usual mistakes get their explanation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitransformer.grading import check_ablation_prediction, check_constant_schedule, check_learned_positions


class _Positions(nn.Module):
    """A configurable learner's version: ``mistake`` picks one wrong variant."""

    def __init__(self, d_model: int, max_len: int, dropout: float = 0.1, mistake: str = "") -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.max_len, self.mistake = max_len, mistake

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if self.mistake == "no offset":
            offset = 0
        if self.mistake != "no check" and offset + x.size(1) > self.max_len:
            raise ValueError("too long")
        table = self.embedding(torch.arange(offset, offset + x.size(1)))  # (T, D)
        if self.mistake == "table only":
            return self.dropout(table.expand_as(x))
        return self.dropout(x + table)


def _positions(mistake: str):
    return lambda d_model, max_len, dropout: _Positions(d_model, max_len, dropout, mistake)


def test_right_answers_pass(capsys) -> None:
    check_ablation_prediction("10-label-smoothing", "b", task=1)
    check_ablation_prediction("10-one-head", "D", task=2)
    check_constant_schedule(lambda step, d_model, warmup, factor: factor * (d_model * warmup) ** -0.5, task=3)
    check_constant_schedule(lambda s, d, w, f: torch.tensor(f * (d * w) ** -0.5), task=3)  # a 0-d tensor is fine
    check_learned_positions(_positions(""), task=4)
    assert capsys.readouterr().out.count("passed") == 5


@pytest.mark.parametrize("question, answer, message", [
    ("10-label-smoothing", "C", "That is the effect of adding label smoothing"),
    ("10-one-head", "A", "both figures got worse"),
    ("10-one-head", None, "set `answer` to a letter first"),
    ("10-one-head", "Z", "Answer with one letter"),
])
def test_wrong_predictions_are_explained(question, answer, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_ablation_prediction(question, answer, task=1)


@pytest.mark.parametrize("fn, message", [
    (lambda s, d, w, f: f * d**-0.5 * min(s**-0.5, s * w**-1.5), "PEAK value"),
    (lambda s, d, w, f: f * d**-0.5 * s**-0.5, "must not decay"),
    (lambda s, d, w, f: f * d**-0.5 * w**-1.5, "slope of the warm-up"),
    (lambda s, d, w, f: (d * w) ** -0.5, "Multiply by `factor`"),
    (lambda s, d, w, f: "fast", "expected a float"),
])
def test_schedule_mistakes_are_explained(fn, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_constant_schedule(fn, task=3)


@pytest.mark.parametrize("mistake, message", [
    ("table only", "Add the position vectors to x"),
    ("no offset", "Start at row `offset`"),
    ("no check", "raised IndexError: .*expected a ValueError"),
])
def test_position_mistakes_are_explained(mistake, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_learned_positions(_positions(mistake), task=4)


def test_an_input_past_the_table_must_raise() -> None:
    class Clipped(_Positions):
        def forward(self, x, offset=0):
            table = self.embedding.weight[offset:offset + x.size(1)]  # (<= T, D): silently short
            return x[:, : table.size(0)] + table

    with pytest.raises(AssertionError, match="returned without an error.*raise a ValueError"):
        check_learned_positions(Clipped, task=4)


def test_a_fixed_or_misshapen_table_is_refused() -> None:
    class Frozen(_Positions):
        def __init__(self, d_model, max_len, dropout=0.1):
            super().__init__(d_model, max_len, dropout)
            self.embedding.weight.requires_grad_(False)

    class Swapped(_Positions):
        def __init__(self, d_model, max_len, dropout=0.1):
            super().__init__(max_len, d_model, dropout)

    with pytest.raises(AssertionError, match="must be trained"):
        check_learned_positions(Frozen, task=4)
    with pytest.raises(AssertionError, match="one row per position"):
        check_learned_positions(Swapped, task=4)
