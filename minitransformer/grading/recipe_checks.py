"""Checks for exercise 10 (why the recipe): predicting ablations, the constant schedule, learned positions."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..embeddings import LearnedPositionalEmbedding
from ..training.schedule import ConstantAtPeak, transformer_lr
from ._common import _build, _call, _compare, _expect_tensor, _isolated, _name, _passed, _rng
from .question_checks import _check_in, _Question

__all__ = ["PREDICTIONS", "check_ablation_prediction", "check_constant_schedule", "check_learned_positions"]

#: The prediction questions of exercise 10, answered from the paper's Table 3 (development set).
PREDICTIONS: dict[str, _Question] = {
    "10-label-smoothing": _Question(
        title="training without label smoothing (Table 3, row D)",
        correct="B",
        why="eps_ls = 0 gave perplexity 4.67 (better than the base model's 4.92) but BLEU 25.3 (worse than 25.8): "
            "smoothing trains the model to be less sure, which perplexity punishes and BLEU rewards",
        wrong={
            "A": "Perplexity improved, but BLEU did not: the paper keeps smoothing for its BLEU.",
            "C": "That is the effect of adding label smoothing, not of removing it: without it the model may be "
                 "sure, so perplexity improves.",
            "D": "Perplexity improved without smoothing: a model trained towards one-hot targets puts more "
                 "probability on the right token.",
        },
    ),
    "10-one-head": _Question(
        title="one attention head instead of eight at the same d_model (Table 3, row A)",
        correct="D",
        why="h = 1 (d_k = 512) gave perplexity 5.29 and BLEU 24.9 against 4.92 and 25.8: one head can attend "
            "to one mixture of positions per layer; eight look at eight",
        wrong={
            "A": "The single head has the same parameters (d_k = d_model), but it attends in one way per layer: "
                 "both figures got worse.",
            "B": "Both got worse: perplexity went up (5.29 against 4.92) as well as BLEU down.",
            "C": "BLEU went down too (24.9 against 25.8).",
        },
    ),
}


@_isolated
def check_ablation_prediction(question: str, answer: Any, *, task: int | str | None = None) -> None:
    """Check a prediction of an ablation's direction (a key of :data:`PREDICTIONS`).

    Args:
        question: the question's key, as in the check cell.
        answer: the learner's letter, e.g. ``"B"``.
        task: task number printed on success.

    Raises:
        AssertionError: the answer is missing or wrong, with what the paper measured.
    """
    __tracebackhide__ = True
    _check_in(PREDICTIONS, question, answer, task, expected="a letter", other="Answer with one letter, A, B, C or D.")


@_isolated
def check_constant_schedule(fn: Callable[[int, int, int, float], float], *, task: int | str | None = None,
                            cases: tuple[tuple[int, int, float], ...] = ((512, 4000, 1.0), (128, 100, 0.5))) -> None:
    """Check ``fn(step, d_model, warmup, factor) -> lr``: the "no warm-up" schedule of lesson 10.

    The rate is the peak of the paper's schedule, ``factor * d_model^-0.5 * warmup^-0.5``, at every
    step from the first one on (:class:`~minitransformer.training.schedule.ConstantAtPeak`).

    Args:
        fn: the learner's function.
        task: task number printed on success.
        cases: ``(d_model, warmup, factor)`` triples tried, each at several steps.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for d_model, warmup, factor in cases:
        expected_fn = ConstantAtPeak(d_model, warmup, factor)
        for step in (warmup // 2 or 1, 1, 2, warmup, 3 * warmup, 50 * warmup):
            text = f"{_name(fn)}(step={step}, d_model={d_model}, warmup={warmup}, factor={factor})"
            got = _call(fn, step, d_model, warmup, factor, text=text)
            if isinstance(got, Tensor) and got.numel() == 1:
                got = got.item()
            if isinstance(got, bool) or not isinstance(got, (int, float)):
                raise AssertionError(f"{text} returned {got!r}; expected a float learning rate")
            expected = expected_fn(step - 1)
            if math.isclose(got, expected, rel_tol=1e-6):
                continue
            hints = [
                (factor * d_model**-0.5 * step**-0.5, "The rate must not decay with the step: use warmup^-0.5, "
                                                      "not step^-0.5."),
                (factor * d_model**-0.5 * warmup**-1.5, "warmup^-1.5 is the slope of the warm-up; its peak is "
                                                        "warmup * warmup^-1.5 = warmup^-0.5."),
                (d_model**-0.5 * warmup**-0.5, "Multiply by `factor` too."),
                (transformer_lr(step, d_model, warmup, factor),
                 "That is the paper's warm-up schedule at this step; the ablation keeps its PEAK value, the rate "
                 "at step = warmup, from the first step on."),
            ]
            hint = next((h for value, h in hints if math.isclose(got, value, rel_tol=1e-6)), "")
            raise AssertionError(f"{text} returned {got:.6g}, expected {expected:.6g}." + (f" {hint}" if hint else ""))
    _passed(task, f"constant learning rate at the schedule's peak, {len(cases)} settings x 6 steps, equal to "
                  "ConstantAtPeak")


@_isolated(avoid=("minitransformer.embeddings:LearnedPositionalEmbedding",))
def check_learned_positions(cls: type[nn.Module], *, task: int | str | None = None,
                            sizes: tuple[tuple[int, int], ...] = ((8, 6), (16, 12))) -> None:
    """Check ``cls(d_model, max_len, dropout)``: learned positional embeddings (Table 3, row E).

    The module holds ``self.embedding = nn.Embedding(max_len, d_model)`` and ``self.dropout``;
    ``forward(x, offset=0)`` returns ``dropout(x + table[offset : offset + T])`` for x of shape
    (B, T, D), and raises a ValueError when ``offset + T > max_len``. Compared with
    :class:`~minitransformer.embeddings.LearnedPositionalEmbedding` holding the same table.

    Args:
        cls: the learner's class.
        task: task number printed on success.
        sizes: ``(d_model, max_len)`` pairs tried.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    for d_model, max_len in sizes:
        built = f"{_name(cls)}({d_model}, {max_len}, 0.0)"
        module = _build(cls, d_model, max_len, 0.0)
        table = getattr(module, "embedding", None)
        if not isinstance(table, nn.Embedding):
            raise AssertionError(f"{built} has no `embedding` of type nn.Embedding; create it in __init__ as "
                                 f"self.embedding = nn.Embedding(max_len, d_model)")
        if tuple(table.weight.shape) != (max_len, d_model):
            swap = " (nn.Embedding(num_embeddings, embedding_dim): one row per position)" \
                if tuple(table.weight.shape) == (d_model, max_len) else ""
            raise AssertionError(f"{built}.embedding.weight has shape {tuple(table.weight.shape)}, expected "
                                 f"({max_len}, {d_model}){swap}")
        if not table.weight.requires_grad:
            raise AssertionError(f"{built}: the table must be trained (requires_grad=True); a fixed table is the "
                                 "sinusoid's job")
        table.weight.copy_(torch.randn(max_len, d_model, generator=g))
        reference = LearnedPositionalEmbedding(d_model, max_len, 0.0).eval()
        reference.embedding.weight.copy_(table.weight)
        x = torch.randn(2, max_len // 2, d_model, generator=g)  # (B, T, D)
        for offset in (0, max_len // 2):
            text = f"{built}.forward(x {tuple(x.shape)}, offset={offset})"
            out = _expect_tensor(_call(lambda: module(x, offset) if offset else module(x), text=text), text,
                                 f"of shape {tuple(x.shape)}")
            expected = reference(x, offset)
            mistakes = [
                ("Add the position vectors to x: return x + table[...], not the table alone.",
                 lambda: table.weight[offset:offset + x.size(1)].expand_as(x)),
                ("Start at row `offset`: when decoding one token at a time, the new token sits at position "
                 "offset, not 0.", lambda: reference(x, 0)),
                ("Use rows offset .. offset + T - 1 of the table, one per position of x.",
                 lambda: x + table.weight[: x.size(1)].flip(0)),
            ]
            _compare(out, expected, text, "output", mistakes, atol=1e-6, rtol=1e-5)
        too_long = torch.zeros(1, max_len, d_model)
        text = f"{built}.forward(x {tuple(too_long.shape)}, offset=1)"
        try:
            module(too_long, 1)
        except ValueError:
            pass
        except Exception as err:
            raise AssertionError(f"{text} raised {type(err).__name__}: {err}; expected a ValueError that says the "
                                 f"sequence is longer than max_len={max_len}") from err
        else:
            raise AssertionError(f"{text} returned without an error; position {max_len} has no row in the table "
                                 f"of max_len={max_len}: raise a ValueError")
    _passed(task, f"learned positional embeddings, {len(sizes)} sizes, offsets 0 and T, too-long input refused; "
                  "equal to LearnedPositionalEmbedding")
