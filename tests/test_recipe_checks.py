"""The checks of exercise 10: right answers pass, the usual mistakes get their explanation."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitransformer.checks import (check_ablation_prediction, check_constant_schedule, check_learned_positions,
                                    check_no_warmup_schedule)
from minitransformer.checks.lesson10 import PREDICTIONS
from minitransformer.training.schedule import DecayWithoutWarmup, transformer_lr


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


def _no_warmup(step: int, d_model: int, warmup: int, factor: float) -> float:
    return factor * d_model**-0.5 * max(step, warmup) ** -0.5


def test_right_answers_pass(capsys) -> None:
    check_ablation_prediction("10-more-smoothing", "c", task=1)
    check_ablation_prediction("10-two-layers", "D", task=2)
    check_ablation_prediction("10-confound", " b ", task=3)
    check_no_warmup_schedule(_no_warmup, task=4)
    check_no_warmup_schedule(_no_warmup, task=4, cases=((64, 7, 2.0), (1024, 8000, 0.25), (32, 1, 1.0)))
    check_constant_schedule(lambda step, d_model, warmup, factor: factor * (d_model * warmup) ** -0.5, task=3)
    check_constant_schedule(lambda s, d, w, f: torch.tensor(f * (d * w) ** -0.5), task=3)  # a 0-d tensor is fine
    check_learned_positions(_positions(""), task=5)
    out = capsys.readouterr().out
    assert out.count("passed") == 8 and "✓ Task 4 passed: learning rate without warm-up, decay kept" in out


def test_every_question_has_one_right_letter_and_explains_the_three_others() -> None:
    for key in ("10-more-smoothing", "10-two-layers", "10-confound"):
        question = PREDICTIONS[key]
        assert question.correct in "ABCD" and set(question.wrong) == set("ABCD") - {question.correct}, key


@pytest.mark.parametrize("question, answer, message", [
    ("10-more-smoothing", "A", "does not move the two figures the same way"),
    ("10-more-smoothing", "B", "moves the other way from eps_ls = 0"),
    ("10-more-smoothing", "D", "decided by the token ranked first"),
    ("10-two-layers", "A", "smaller models were worse"),
    ("10-two-layers", "B", "removes two thirds of the attention and feed-forward"),
    ("10-two-layers", "C", "Parameters are not the whole story"),
    ("10-confound", "A", "also differ after step 100"),
    ("10-confound", "C", "noise and a confound are separate problems"),
    ("10-confound", "D", "100 times below the peak"),
    ("10-confound", None, "set `answer` to a letter first"),
    ("10-two-layers", "Z", "Answer with one letter"),
])
def test_wrong_predictions_are_explained(question, answer, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_ablation_prediction(question, answer, task=1)


def test_the_confound_questions_numbers_are_right() -> None:
    # Task 3's runs: d_model 128, factor 0.5, warm-up 100, 900 steps. Run C is the peak at every step.
    paper = [transformer_lr(s, 128, 100, 0.5) for s in range(1, 901)]
    no_warmup = [DecayWithoutWarmup(128, 100, 0.5)(s - 1) for s in range(1, 901)]
    peak = transformer_lr(100, 128, 100, 0.5)
    assert peak / paper[-1] == pytest.approx(3.0)  # at step 900, run C's rate is 3 times run P's
    assert 900 * peak / sum(paper) == pytest.approx(2.0, abs=0.01)  # about twice on average
    assert sum(no_warmup) / sum(paper) == pytest.approx(1.11, abs=0.005)  # task 4's schedule: 1.11 times
    assert peak / transformer_lr(1, 128, 100, 0.5) == pytest.approx(100)  # option D: 100 times below the peak


@pytest.mark.parametrize("fn, message", [
    (lambda s, d, w, f: f * (d * w) ** -0.5, "constant rate at the schedule's peak, which removes the decay too"),
    (lambda s, d, w, f: f * d**-0.5 * min(s**-0.5, s * w**-1.5), "the paper's schedule with its warm-up"),
    (lambda s, d, w, f: f * d**-0.5 * min(s, w) ** -0.5, "Take the MAX of step and warmup"),
    (lambda s, d, w, f: f * d**-0.5 * s**-0.5, "Hold the peak until step = warmup"),
    (lambda s, d, w, f: f * d**-0.5 * max(s + 1, w) ** -0.5, "it counts from 1.*one step ahead"),
    (lambda s, d, w, f: f * d**-0.5 * max(s - 1, w) ** -0.5, "it counts from 1.*one step behind"),
    (lambda s, d, w, f: f * d**-0.5 * max(s, w) ** -1.5, "power -0.5, not -1.5"),
    (lambda s, d, w, f: f * d**-0.5 * max(s, w) ** -1, "power -0.5, not -1"),
    (lambda s, d, w, f: f * d**0.5 * max(s, w) ** -0.5, "not by sqrt"),
    (lambda s, d, w, f: d**-0.5 * max(s, w) ** -0.5, "Multiply by `factor` too"),
    (lambda s, d, w, f: torch.tensor(f * d**-0.5 * max(s, w) ** -0.5), "returned a float32 tensor.*Python float"),
    (lambda s, d, w, f: torch.full((2,), 0.1), "returned a float32 tensor \\(2\\)"),
    (lambda s, d, w, f: "fast", "expected a float learning rate"),
    (lambda s, d, w, f: None, "expected a float learning rate"),
    (lambda s, d, w, f: 1.0 / (s - s), "raised ZeroDivisionError"),
])
def test_no_warmup_mistakes_are_explained(fn, message) -> None:
    with pytest.raises(AssertionError, match=message):
        check_no_warmup_schedule(fn, task=4)


def test_a_wrong_value_with_no_known_mistake_says_what_was_expected() -> None:
    # The call shown is the one that differs most: here the last step, far into the decay.
    with pytest.raises(AssertionError, match=r"\(step=200000, d_model=512, .*\) returned 0.5, expected 9.88212e-05\.$"):
        check_no_warmup_schedule(lambda s, d, w, f: 0.5, task=4)


def test_the_packages_schedule_is_refused(capsys) -> None:
    with pytest.raises(AssertionError, match="Task 4: your code calls minitransformer's transformer_lr"):
        check_no_warmup_schedule(lambda s, d, w, f: transformer_lr(max(s, w), d, w, f), task=4)
    with pytest.raises(AssertionError, match="Task 4: your code calls minitransformer's transformer_lr"):
        check_no_warmup_schedule(lambda s, d, w, f: DecayWithoutWarmup(d, w, f)(s - 1), task=4)
    assert "passed" not in capsys.readouterr().out
    assert transformer_lr(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)  # the sentinel is gone


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
        check_learned_positions(_positions(mistake), task=5)


def test_an_input_past_the_table_must_raise() -> None:
    class Clipped(_Positions):
        def forward(self, x, offset=0):
            table = self.embedding.weight[offset:offset + x.size(1)]  # (<= T, D): silently short
            return x[:, : table.size(0)] + table

    with pytest.raises(AssertionError, match="returned without an error.*raise a ValueError"):
        check_learned_positions(Clipped, task=5)


def test_a_fixed_or_misshapen_table_is_refused() -> None:
    class Frozen(_Positions):
        def __init__(self, d_model, max_len, dropout=0.1):
            super().__init__(d_model, max_len, dropout)
            self.embedding.weight.requires_grad_(False)

    class Swapped(_Positions):
        def __init__(self, d_model, max_len, dropout=0.1):
            super().__init__(max_len, d_model, dropout)

    with pytest.raises(AssertionError, match="must be trained"):
        check_learned_positions(Frozen, task=5)
    with pytest.raises(AssertionError, match="one row per position"):
        check_learned_positions(Swapped, task=5)
