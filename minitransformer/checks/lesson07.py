"""Checks for exercise 07: the warm-up learning-rate schedule, token-budget batching, label smoothing (lesson 07)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.batching import TokenBatchSampler
from ..training.schedule import transformer_lr
from .compare import (as_number, call_learner, all_close, compare, describe, expect_shape, expect_tensor, isolated, callable_name,
                      report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_label_smoothing_target", "check_token_batches", "check_warmup_schedule"]


@isolated(avoid=("minitransformer.training.schedule:transformer_lr",),
          builds='the schedule from its formula', allow=())
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
        text = f"{callable_name(fn)}(step={step}, d_model={d_model}, warmup={warmup})"
        got = as_number(call_learner(fn, step, d_model, warmup, text=text), text, "the learning rate, a float")
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
    report_passed(task, "warm-up schedule, 9 steps (first step, warm-up, peak, decay; 3 model widths)")


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


@isolated(builds='the batches from sorting and a running count, in Python', allow=())
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
        text = f"{callable_name(fn)}(src_lengths={src}, tgt_lengths={tgt}, max_tokens={budget})"
        got = call_learner(fn, list(src), list(tgt), budget, text=text)
        if not isinstance(got, (list, tuple)) or not all(isinstance(b, (list, tuple)) for b in got):
            raise AssertionError(f"{text} returned {describe(got)}; expected a list of batches, each a list of "
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
    report_passed(task, "token-budget batches, 5 cases (a batch that fills the budget exactly, one pair, one batch), "
                  "equal to TokenBatchSampler")


def _smoothed_targets_reference(target: Tensor, vocab_size: int, epsilon: float, pad_id: int) -> Tensor:
    """q(gold) = 1 - eps, q(pad) = 0, eps / (V - 2) elsewhere; all zeros where the target is padding."""
    q = torch.full((*target.shape, vocab_size), epsilon / (vocab_size - 2))
    q[..., pad_id] = 0.0
    q.scatter_(-1, target[..., None], 1.0 - epsilon)
    return q.masked_fill((target == pad_id)[..., None], 0.0)  # (B, T, V)


@isolated(avoid=("minitransformer.training.loss:label_smoothed_nll", "minitransformer.training.loss:LabelSmoothingLoss"),
          builds='the smoothed target from one_hot (or scatter) and arithmetic', allow=('one_hot',))
def check_label_smoothing_target(fn: Callable[[Tensor, int, float, int], Tensor], *,
                                 task: int | str | None = None) -> None:
    """Check ``fn(target, vocab_size, epsilon, pad_id) -> q`` (B, T, V), the label-smoothed targets of section 5.4.

    q(gold) = 1 - eps, q(pad) = 0, every other token eps / (V - 2), and a row of zeros where the
    target itself is padding. The cross-entropy with these targets must equal
    :func:`minitransformer.training.label_smoothed_nll`, which is checked too.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    from ..training.loss import label_smoothed_nll

    g = make_rng()
    cases = [
        (torch.tensor([[4, 5, 2, 0, 0], [5, 6, 6, 4, 2]]), 7, 0.1, 0),
        (torch.tensor([[2, 0, 4], [1, 1, 1]]), 5, 0.2, 1),
        (torch.tensor([[5, 4]]), 6, 0.0, 0),
    ]
    for target, vocab, eps, pad_id in cases:
        text = f"{callable_name(fn)}(target {shape_text(target)}, vocab_size={vocab}, epsilon={eps}, pad_id={pad_id})"
        q = expect_tensor(call_learner(fn, target, vocab, eps, pad_id, text=text), text, "of shape (B, T, V)")
        expect_shape(q, (*target.shape, vocab), text, "q", {
            (target.numel(), vocab): "Keep the (B, T) axes: q is (B, T, V), one distribution per position.",
        })
        if not q.is_floating_point():
            raise AssertionError(f"{text} returned a {q.dtype} tensor; probabilities are floating-point numbers")
        expected = _smoothed_targets_reference(target, vocab, eps, pad_id)
        real = target != pad_id
        uniform = F.one_hot(target, vocab) * (1 - eps) + eps / vocab  # (B, T, V)
        if eps > 0 and all_close(q[real], uniform[real], 1e-5, 1e-4):
            raise AssertionError(
                f"{text}: that is F.cross_entropy's label_smoothing (eps spread over all V tokens, gold and pad "
                "included). Here the gold token gets exactly 1 - eps, padding 0, and each of the other V - 2 "
                "tokens eps / (V - 2)."
            )
        sums = q.sum(-1)
        if not torch.allclose(sums[real], torch.ones_like(sums[real]), atol=1e-5):
            b, t = (int(i) for i in real.nonzero()[((sums[real] - 1).abs() > 1e-5).nonzero()[0, 0]])
            raise AssertionError(
                f"{text}: the distribution of position ({b}, {t}) sums to {sums[b, t].item():.4f}, not 1. The gold "
                "token gets 1 - eps, padding 0, and the eps left is shared by the V - 2 other tokens."
            )
        if (q[~real] != 0).any():
            raise AssertionError(f"{text}: a position whose target is padding counts for nothing: its row of q "
                                 "must be all zeros.")
        if (q[..., pad_id] != 0).any():
            raise AssertionError(f"{text}: padding is never a correct next token, so column pad_id={pad_id} of q "
                                 "must be 0.")
        compare(q, expected, text, "q", [
            ("The gold token gets exactly 1 - eps.", lambda: _smoothed_targets_reference(target, vocab, 0.0, pad_id)),
        ])
        logits = random_tensor(g, *target.shape, vocab)
        ours = -(q * torch.log_softmax(logits, dim=-1)).sum()
        assert torch.allclose(ours, label_smoothed_nll(logits, target, eps, pad_id)[0], atol=1e-4), (
            f"{text}: the cross-entropy -sum q log p with your q differs from label_smoothed_nll"
        )
    report_passed(task, "label-smoothed targets, 3 batches (eps 0.1, 0.2 and 0, pad id 0 and 1); "
                  "their cross-entropy equals label_smoothed_nll")
