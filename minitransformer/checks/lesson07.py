"""Checks for training: the warm-up learning-rate schedule and token-budget batching (lesson 07)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..data.batching import TokenBatchSampler
from ..training.schedule import transformer_lr
from ._common import _call, _describe, _isolated, _name, _passed
from ._mistakes import _as_number

__all__ = ["check_token_batches", "check_warmup_schedule"]


@_isolated(avoid=("minitransformer.training.schedule:transformer_lr",))
def check_warmup_schedule(fn: Callable[[int, int, int], Any], *, task: int | str | None = None) -> None:
    """Check ``fn(step, d_model, warmup) -> lr`` against :func:`transformer_lr` (section 5.3, lesson 07).

    lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), with ``step`` counted from 1.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [(1, 512, 4000), (2000, 512, 4000), (4000, 512, 4000), (4001, 512, 4000), (100000, 512, 4000),
             (1, 64, 400), (400, 64, 400), (5000, 64, 400), (10, 1024, 10)]
    for step, d_model, warmup in cases:
        text = f"{_name(fn)}(step={step}, d_model={d_model}, warmup={warmup})"
        got = _as_number(_call(fn, step, d_model, warmup, text=text), text, "the learning rate, a float")
        expected = transformer_lr(step, d_model, warmup)
        if abs(got - expected) <= 1e-9 * max(1.0, abs(expected)) + 1e-12:
            continue
        scale = d_model**-0.5
        candidates = [
            (scale * max(step**-0.5, step * warmup**-1.5),
             "Take the MIN of the two terms: the linear warm-up is the smaller one before step = warmup, the "
             "1/sqrt(step) decay after it."),
            (scale * min(step**-0.5, step * warmup**-0.5),
             "The warm-up term is step * warmup^-1.5 (so that both terms meet at step = warmup), not warmup^-0.5."),
            (min(step**-0.5, step * warmup**-1.5), "The whole schedule is multiplied by d_model^-0.5; yours is not."),
            (d_model**0.5 * min(step**-0.5, step * warmup**-1.5),
             "Multiply by d_model^-0.5 = 1/sqrt(d_model), not by sqrt(d_model)."),
            (transformer_lr(step + 1, d_model, warmup),
             "Use step as given (it already counts from 1); you added 1."),
            (scale * min(step**-0.5, step * warmup**-1.5) * warmup,
             "The warm-up term is step * warmup^-1.5."),
        ]
        hint = next((h for value, h in candidates if abs(got - value) <= 1e-9 * max(1.0, abs(value)) + 1e-12), "")
        raise AssertionError(f"{text} returned {got:.6g}; expected {expected:.6g}." + (f" {hint}" if hint else ""))
    _passed(task, "warm-up schedule, 9 steps (first step, warm-up, peak, decay; 3 model widths)")


def _cut_by_hand(src: Sequence[int], tgt: Sequence[int], max_tokens: int, *, key: str = "max",
                 cost: str = "padded", strict: bool = False) -> list[list[int]]:
    """Sort, then cut greedily; the switches turn on the usual mistakes."""
    keys = {"max": lambda i: (max(src[i], tgt[i]), tgt[i], src[i]), "src": lambda i: src[i],
            "none": lambda i: 0}
    order = sorted(range(len(src)), key=keys[key])
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        trial = batch + [i]
        if cost == "padded":
            size = len(trial) * max(max(src[j], tgt[j]) for j in trial)
        else:
            size = max(sum(src[j] for j in trial), sum(tgt[j] for j in trial))
        if batch and (size >= max_tokens if strict else size > max_tokens):
            batches.append(batch)
            trial = [i]
        batch = trial
    batches.append(batch)
    return batches


@_isolated
def check_token_batches(fn: Callable[[Sequence[int], Sequence[int], int], list[list[int]]], *,
                        task: int | str | None = None) -> None:
    """Check ``fn(src_lengths, tgt_lengths, max_tokens) -> batches``: token-budget batching (section 5.1, lesson 07).

    Order the pairs by (max(S, T), T, S), ties by index; cut that order greedily: a pair joins the
    current batch as long as (pairs in the batch) * (longest S or T in the batch) stays at most
    ``max_tokens``, else it starts the next batch. The same batches as
    ``TokenBatchSampler(..., shuffle=False).all_batches()``.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [
        ([5, 3, 8, 2, 7, 3, 4], [6, 2, 7, 3, 9, 4, 4], 16),
        ([2, 2, 2, 2], [2, 2, 2, 2], 8),  # a batch that fills the budget exactly
        ([12, 1, 6, 6, 3, 9, 2, 5, 5, 11, 4, 7], [10, 2, 7, 5, 3, 8, 2, 6, 4, 12, 5, 6], 24),
        ([3], [4], 4),
        ([4, 6, 2], [5, 1, 2], 100),  # everything fits in one batch
    ]
    for src, tgt, budget in cases:
        text = f"{_name(fn)}(src_lengths={src}, tgt_lengths={tgt}, max_tokens={budget})"
        got = _call(fn, list(src), list(tgt), budget, text=text)
        if not isinstance(got, (list, tuple)) or not all(isinstance(b, (list, tuple)) for b in got):
            raise AssertionError(f"{text} returned {_describe(got)}; expected a list of batches, each a list of "
                                 "pair indices")
        got = [[int(i) for i in b] for b in got]
        expected = TokenBatchSampler(src, tgt, budget, shuffle=False).all_batches()
        if got == expected:
            continue
        flat = sorted(i for b in got for i in b)
        if flat != list(range(len(src))):
            raise AssertionError(f"{text} returned {got}: every pair index 0..{len(src) - 1} must appear in exactly "
                                 "one batch")
        if any(len(b) == 0 for b in got):
            raise AssertionError(f"{text} returned {got}, with an empty batch")
        for b in got:
            width = max(max(src[i], tgt[i]) for i in b)
            if len(b) * width > budget:
                hint = (" Padding counts: the batch becomes (pairs) x (longest row) tensors, so its cost is "
                        "len(batch) * max(S, T), not the sum of the lengths."
                        if max(sum(src[i] for i in b), sum(tgt[i] for i in b)) <= budget else "")
                raise AssertionError(f"{text}: batch {b} has {len(b)} pairs padded to {width} tokens, "
                                     f"{len(b) * width} > max_tokens={budget}.{hint}")
        hints = [
            (_cut_by_hand(src, tgt, budget, strict=True),
             "A batch may use the budget exactly: cut when the cost would EXCEED max_tokens (>), not when it "
             "reaches it."),
            (_cut_by_hand(src, tgt, budget, key="src"),
             "Sort by the longer side of each pair, (max(S, T), T, S): the budget is set by max(S, T), so sorting by "
             "the source alone leaves long targets in short batches."),
            (_cut_by_hand(src, tgt, budget, key="none"),
             "Sort the pairs by length before cutting, so that each batch holds pairs of similar lengths and little "
             "padding."),
        ]
        hint = next((h for value, h in hints if value == got), "")
        raise AssertionError(f"{text}: expected the batches {expected}, got {got}." + (f" {hint}" if hint else ""))
    _passed(task, "token-budget batches, 5 cases (a batch that fills the budget exactly, one pair, one batch), "
                  "equal to TokenBatchSampler")
