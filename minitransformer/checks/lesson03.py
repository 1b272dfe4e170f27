"""Checks for exercise 03: scaled dot-product attention, the padding mask, log-sum-exp, a stable softmax (lesson 03)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..masks import make_causal_mask, make_padding_mask
from .operations import MATMUL, SOFTMAX
from .compare import (call_learner, call_text, all_close, compare, describe, expect_bool, expect_shape, expect_tensor,
                      isolated, known_mistake, callable_name, report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_logsumexp", "check_padding_mask", "check_scaled_dot_product_attention", "check_stable_softmax"]


def _attention_by_hand(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
                       scale: float | None, softmax_dim: int = -1, invert_mask: bool = False) -> tuple[Tensor, Tensor]:
    """Attention with a chosen scale and softmax axis, and no fix for fully masked rows (NaN stays NaN)."""
    scores = query @ key.transpose(-2, -1)  # (..., Tq, Tk)
    if scale is not None:
        scores = scores / scale
    if mask is not None:
        scores = scores.masked_fill(mask if invert_mask else ~mask, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim)
    return weights @ value, weights


def _attention_cases(g: torch.Generator) -> list[tuple[str, Tensor, Tensor, Tensor, Tensor | None]]:
    keep = torch.tensor([[True, True, True, False, False], [True, True, True, True, False]])
    return [
        ("self-attention (B, T, d_k)", random_tensor(g, 2, 4, 8), random_tensor(g, 2, 4, 8), random_tensor(g, 2, 4, 8), None),
        ("cross-attention with heads, Tq=3, Tk=5, d_k=8, d_v=6",
         random_tensor(g, 2, 2, 3, 8), random_tensor(g, 2, 2, 5, 8), random_tensor(g, 2, 2, 5, 6), None),
        ("a padding mask (B, 1, 1, Tk)",
         random_tensor(g, 2, 2, 3, 8), random_tensor(g, 2, 2, 5, 8), random_tensor(g, 2, 2, 5, 6), keep[:, None, None, :]),
        ("a causal mask (1, 1, T, T)", random_tensor(g, 2, 2, 4, 8), random_tensor(g, 2, 2, 4, 8), random_tensor(g, 2, 2, 4, 8),
         make_causal_mask(4)),
        ("a single key", random_tensor(g, 1, 3, 4), random_tensor(g, 1, 1, 4), random_tensor(g, 1, 1, 4), None),
    ]


@isolated(avoid=("minitransformer.attention:scaled_dot_product_attention", "minitransformer.attention:MultiHeadAttention",
                   "torch.nn.functional:scaled_dot_product_attention", "torch.nn:MultiheadAttention"),
          builds='attention from matrix products, a scale and a softmax', allow=(*MATMUL, *SOFTMAX))
def check_scaled_dot_product_attention(fn: Callable[..., tuple[Tensor, Tensor]], *,
                                       task: int | str | None = None) -> None:
    """Check ``fn(query, key, value, mask=None) -> (output, weights)`` against :func:`scaled_dot_product_attention`.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (section 3.2.1, lesson 03), with a bool mask
    (True = may attend) broadcastable to the scores; masked keys get weight 0.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for case, query, key, value, mask in _attention_cases(make_rng()):
        args = (query, key, value) if mask is None else (query, key, value, mask)
        text = call_text(fn, *args, names=("query", "key", "value", "mask")) + f" [{case}]"
        result = call_learner(fn, *args, text=text, in_place="changed its inputs in place: compute new tensors "
                              "instead (e.g. masked_fill, not masked_fill_)")
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{text} returned {describe(result)}; expected a pair (output, weights)")
        out, weights = result
        expect_tensor(out, text, "as the output")
        expect_tensor(weights, text, "as the weights")
        expected_out, expected_w = scaled_dot_product_attention(query, key, value, mask)
        if weights.shape == expected_out.shape and out.shape == expected_w.shape and out.shape != weights.shape:
            raise AssertionError(f"{text} returned (weights, output): return (output, weights) in that order")
        expect_shape(weights, expected_w.shape, text, "weights",
                      {tuple(expected_w.transpose(-2, -1).shape): "The weights are (..., Tq, Tk): one row per query."})
        expect_shape(out, expected_out.shape, text, "output")
        d_k, d_v = query.size(-1), value.size(-1)
        if torch.isnan(weights).any():
            raise AssertionError(
                f"{text}: your weights contain NaN. A query whose keys are all masked gets a row of -inf scores "
                "and a softmax of 0/0; here every query may see at least one key, so the mask was probably "
                "applied the wrong way round (True means 'may attend': fill the scores where the mask is False)."
            )
        if mask is not None:
            hidden = (~mask).expand_as(weights) & (weights.abs() > 1e-6)
            if hidden.any() and bool((weights.abs() <= 1e-6)[mask.expand_as(weights)].all()):
                raise AssertionError(f"{text}: your weights are 0 exactly where the mask is True. True means "
                                     "'may attend': fill the scores where the mask is False, masked_fill(~mask, ...).")
            if hidden.any():
                index = tuple(int(i) for i in hidden.nonzero()[0])
                raise AssertionError(
                    f"{text}: query {index[-2]} gives weight {weights[index].item():.3f} to key {index[-1]}, which the "
                    "mask hides (False). Set the hidden scores to -inf before the softmax, e.g. "
                    "scores.masked_fill(~mask, float('-inf')), so that their weights are exactly 0."
                )
        sums = weights.sum(dim=-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
            row = tuple(int(i) for i in ((sums - 1).abs() > 1e-4).nonzero()[0])
            hint = ("Your columns sum to 1: the softmax ran over the queries (dim -2)." if
                    torch.allclose(weights.sum(dim=-2), torch.ones(1), atol=1e-4) else "")
            for factor, words in ((1 / math.sqrt(d_k), "divided by sqrt(d_k)"), (math.sqrt(d_k), "multiplied by sqrt(d_k)"),
                                  (1 / d_k, "divided by d_k")):
                if torch.allclose(sums, torch.full_like(sums, factor), atol=1e-4):
                    raise AssertionError(
                        f"{text}: your attention weights' rows sum to {factor:.3f}, not 1: you {words} after the "
                        "softmax. Scale the scores before it: softmax(Q K^T / sqrt(d_k)).")
            raise AssertionError(
                f"{text}: your attention weights' rows do not sum to 1 (row {row} sums to {sums[row].item():.2f}): "
                f"did you apply the softmax over the last dimension, the keys? {hint}".rstrip()
            )
        mistakes = [
            ("The scores must be divided by sqrt(d_k) before the softmax; yours are not scaled.",
             lambda: _attention_by_hand(query, key, value, mask, scale=None)[1]),
            (f"Divide by sqrt(d_k) = {math.sqrt(d_k):.3f}, not by d_k = {d_k}.",
             lambda: _attention_by_hand(query, key, value, mask, scale=float(d_k))[1]),
            ("Divide the scores by sqrt(d_k), don't multiply them.",
             lambda: _attention_by_hand(query, key, value, mask, scale=1 / math.sqrt(d_k))[1]),
            ("Scale by sqrt(d_k), the width of the queries and keys, not sqrt(d_v), the width of the values.",
             lambda: _attention_by_hand(query, key, value, mask, scale=math.sqrt(d_v))[1] if d_v != d_k else None),
            ("True in the mask means 'may attend': your mask hides the keys it should keep.",
             lambda: _attention_by_hand(query, key, value, mask, scale=math.sqrt(d_k), invert_mask=True)[1]
             if mask is not None else None),
        ]
        compare(weights, expected_w, text, "weights", mistakes)
        compare(out, expected_out, text, "output", [
            ("Your weights are right, but they must average the values (weights @ value), not the keys.",
             lambda: expected_w @ key),
        ])
    report_passed(task, "scaled dot-product attention, 5 cases (3-D and 4-D inputs, cross-attention, "
                  "padding and causal masks, a single key)")


@isolated(avoid=("minitransformer.masks:make_padding_mask", "minitransformer.masks:make_target_mask"),
          builds='the padding mask from a comparison', allow=())
def check_padding_mask(fn: Callable[[Tensor, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(tokens, pad_id)`` against :func:`make_padding_mask`: bool (B, 1, 1, S), True on real tokens.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [
        (torch.tensor([[5, 7, 9, 0, 0], [3, 4, 6, 8, 0], [6, 5, 4, 3, 2]]), 0),
        (torch.tensor([[6, 2, 9, 1, 1, 1], [7, 1, 1, 1, 1, 1]]), 1),
        (torch.tensor([[3]]), 0),
    ]
    for tokens, pad_id in cases:
        text = f"{callable_name(fn)}(tokens {shape_text(tokens)}, pad_id={pad_id})"
        mask = expect_tensor(call_learner(fn, tokens, pad_id, text=text), text, "(the mask)")
        expect_bool(mask, text)
        batch, length = tokens.shape
        expect_shape(mask, (batch, 1, 1, length), text, "mask", {
            (batch, length): "Add two axes, (B, S) -> (B, 1, 1, S), so the mask broadcasts over the heads and "
                             "the queries: tokens[:, None, None, :].",
            (batch, 1, length): "One axis is missing: (B, 1, 1, S) broadcasts over the heads and the queries.",
            (batch, length, 1, 1): "The keys must be the last axis (the mask hides key columns): (B, 1, 1, S).",
            (batch, 1, length, 1): "The keys must be the last axis (the mask hides key columns): (B, 1, 1, S).",
        })
        expected = make_padding_mask(tokens, pad_id)
        if not torch.equal(mask, expected):
            if torch.equal(mask, ~expected):
                hint = "True must mean 'may attend', i.e. a real token: compare with `tokens != pad_id`."
            elif pad_id != 0 and torch.equal(mask, make_padding_mask(tokens, 0)):
                hint = f"Compare with the pad_id argument ({pad_id} here), not with 0."
            else:
                hint = f"expected {expected[:, 0, 0].int().tolist()} (1 = real token), got {mask[:, 0, 0].int().tolist()}."
            raise AssertionError(f"{text} gave the wrong mask. {hint}")
    report_passed(task, "padding mask, 3 batches (pad id 0 and 1, a sentence without padding, length 1)")


# --- The softmax that does not overflow (lesson 03, "A softmax that does not overflow") --------------------------

_INF = float("inf")


def _lse_by_hand(x: Tensor, dim: int, *, shift: str = "row", add_back: bool = True, log: bool = True,
                 mean: bool = False, keep: bool = False, finite_fix: bool = True) -> Tensor:
    """Log-sum-exp with one of the usual mistakes (the defaults are right); float32, like the learner's."""
    if shift == "none":
        m = torch.zeros_like(x.amax(dim=dim, keepdim=True))
    elif shift == "global":
        m = x.max().expand_as(x.amax(dim=dim, keepdim=True))
    else:
        m = x.amax(dim=dim, keepdim=True)  # (..., 1, ...)
    if finite_fix:
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    total = torch.exp(x - m)
    total = total.mean(dim=dim, keepdim=True) if mean else total.sum(dim=dim, keepdim=True)
    out = (torch.log(total) if log else total) + (m if add_back else 0.0)
    return out if keep else out.squeeze(dim)


def _unkept_shift(x: Tensor, dim: int) -> Tensor:
    """x - x.amax(dim) without keepdim: on a square matrix it broadcasts the row maxima along the wrong axis."""
    m = x.amax(dim=dim)
    return m + torch.log(torch.exp(x - m).sum(dim=dim))


def _call_explained(fn: Callable[..., Tensor], *args: object, text: str, in_place: str | None = None) -> Tensor:
    """:func:`call_learner`, with a hint for the errors that the dimension bookkeeping of this task raises."""
    __tracebackhide__ = True
    try:
        return call_learner(fn, *args, text=text, in_place=in_place)
    except AssertionError as err:
        message = str(err)
        if "return_types.max" in message or "return_types.min" in message:
            hint = ("x.max(dim) returns a pair (values, indices): take .values, or use x.amax(dim=dim, "
                    "keepdim=True), which returns the values only.")
        elif "must match the size of tensor" in message:
            hint = ("A reduction over dim removes that axis, so the result no longer lines up with x: keep it "
                    "(keepdim=True) or put it back (.unsqueeze(dim)) before subtracting it from x.")
        else:
            raise
        raise AssertionError(f"{message}. {hint}") from err


def _lse_cases(g: torch.Generator) -> list[tuple[str, Tensor, int]]:
    rows = torch.tensor([[1000.0, 999.0, 998.0], [-5.0, -4.0, -3.0], [0.5, -0.5, 0.0]])
    masked = (random_tensor(g, 2, 4, scale=5.0)).masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril()[:2], -_INF)
    return [
        ("small scores, dim=-1", random_tensor(g, 3, 5), -1),
        ("the lesson's scores [1000, 999, 800]", torch.tensor([1000.0, 999.0, 800.0]), 0),
        ("large negative scores [-1000, -1001, -1200]", torch.tensor([-1000.0, -1001.0, -1200.0]), -1),
        ("rows of very different sizes", rows, -1),
        ("a 3-D input, dim=1", random_tensor(g, 2, 3, 4, scale=30.0) + 500.0, 1),
        ("a square matrix, dim=0", random_tensor(g, 3, 3, scale=40.0) - 300.0, 0),
        ("scores with masked keys (-inf)", masked, -1),
        ("a row that is all -inf (a query whose keys are all masked)",
         torch.tensor([[1.0, 2.0, 3.0], [-_INF, -_INF, -_INF]]), -1),
    ]


def _without(shape: Sequence[int], dim: int) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(shape) if i != dim % len(shape))


def _lse_shape_hints(x: Tensor, dim: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of a log-sum-exp and what they mean."""
    keep = tuple(1 if i == dim % x.dim() else n for i, n in enumerate(x.shape))
    hints: dict[tuple[int, ...], str] = {}
    for other in range(x.dim()):
        if other != dim % x.dim():
            hints.setdefault(_without(x.shape, other), f"You reduced dimension {other}; reduce over dim={dim}, "
                                                       "the argument, in the max and in the sum.")
    try:
        mixed = tuple(torch.broadcast_shapes(keep, _without(x.shape, dim)))
        if mixed != _without(x.shape, dim):
            hints[mixed] = ("The max kept its axis (keepdim=True) and the sum dropped it, so adding them "
                            f"broadcast to {shape_text(mixed)}: squeeze the max, m.squeeze(dim), or keep both and "
                            "squeeze the result.")
    except RuntimeError:
        pass
    hints[keep] = (f"torch.logsumexp(x, dim) removes the reduced dimension: {shape_text(_without(x.shape, dim))}, not "
                   f"{shape_text(keep)}. Squeeze it at the end, .squeeze(dim) (keepdim=True is for the max inside).")
    hints[()] = f"Reduce over dim={dim} only, one log-sum-exp per row, not over the whole tensor."
    return hints


@isolated(avoid=("torch:logsumexp", "torch.special:logsumexp", "torch:log_softmax",
                  "torch.nn.functional:log_softmax", "torch.special:log_softmax"),
          builds='log-sum-exp from max, exp, sum and log', allow=())
def check_logsumexp(fn: Callable[[Tensor, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(x, dim)`` against :func:`torch.logsumexp`: log sum_j exp(x_j) over ``dim``, without overflow.

    LSE(x) = m + log sum_j exp(x_j - m) with m the largest entry of each row (lesson 03), the reduced
    dimension removed. Cases: small scores, the lesson's scores near 1000 (e^1000 is inf), large
    negative ones (e^-1000 is 0), rows of very different sizes, 3-D and square inputs with dim 1 and 0,
    masked scores (-inf) and a row that is all -inf, whose log-sum-exp is -inf.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = _lse_cases(make_rng())
    for case, x, dim in cases:
        text = f"{callable_name(fn)}(x {shape_text(x)}, dim={dim}) [{case}]"
        wanted = f"of shape {shape_text(_without(x.shape, dim))}"
        given = expect_tensor(_call_explained(fn, x, dim, text=text, in_place="changed x in place: compute new "
                                              "tensors (x - m, not x -= m or x.sub_(m))"), text, wanted)
        expected = torch.logsumexp(x, dim=dim)
        expect_shape(given, expected.shape, text, "log-sum-exp", _lse_shape_hints(x, dim))
        if all_close(given, expected, 1e-4, 1e-5):
            continue
        mistakes = [
            ("You computed log(sum(exp(x))) as written: exp(x) overflows to inf once x > 88.7 in float32 (709.8 "
             "in float64) and rounds to 0 below about -104, whose log is -inf. Subtract the maximum m of each row "
             "first and add it back after the log: LSE(x) = m + log(sum(exp(x - m))).",
             lambda: _lse_by_hand(x, dim, shift="none", finite_fix=False)),
            ("You subtracted the maximum but forgot to add it back: LSE(x) = m + log(sum(exp(x - m))), and "
             "log(sum(exp(x - m))) alone is only the part between 0 and log(n).",
             lambda: _lse_by_hand(x, dim, add_back=False)),
            ("Take the maximum of each row along dim (x.amax(dim=dim, keepdim=True)), not one maximum of the "
             "whole tensor: a row far below it underflows, exp(-1000) = 0 and log(0) = -inf.",
             lambda: _lse_by_hand(x, dim, shift="global")),
            ("x - x.amax(dim) without keepdim broadcast the row maxima along the wrong axis (the matrix is "
             "square, so no error was raised): keep the axis, x.amax(dim=dim, keepdim=True).",
             lambda: _unkept_shift(x, dim) if x.dim() == 2 and x.size(0) == x.size(1) else None),
            ("The log is missing: LSE(x) = m + log(sum(exp(x - m))).",
             lambda: _lse_by_hand(x, dim, log=False)),
            ("Sum the exponentials, don't average them (your result is LSE(x) - log(n)).",
             lambda: _lse_by_hand(x, dim, mean=True)),
            (f"You reduced over the last dimension; reduce over dim={dim}, the argument.",
             lambda: torch.logsumexp(x, dim=-1) if dim % x.dim() != x.dim() - 1 else None),
        ]
        hint = known_mistake(given, mistakes, atol=1e-4, rtol=1e-5)
        if hint is not None:
            raise AssertionError(f"{text}: wrong log-sum-exp. {hint}")
        finite = torch.isfinite(expected)
        if bool(torch.isnan(given[~finite]).any()) and bool(torch.isinf(expected).any()):
            raise AssertionError(
                f"{text}: your log-sum-exp of a row that is all -inf is NaN; it should be -inf (log of a sum of "
                "zeros). The row's maximum is -inf and -inf - (-inf) is NaN: shift by 0 where the maximum is not "
                "finite, e.g. m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).")
        for bad, words in ((torch.isposinf, "+inf"), (torch.isneginf, "-inf"), (torch.isnan, "NaN")):
            if bool(bad(given[finite]).any()):
                raise AssertionError(
                    f"{text}: your log-sum-exp is {words} where it should be finite "
                    f"(expected {expected.tolist()}): exp(x) overflows above 88.7 and underflows to 0 far below 0. "
                    "Subtract each row's maximum before exp and add it back after the log.")
        compare(given, expected, text, "log-sum-exp", atol=1e-4, rtol=1e-5)
    report_passed(task, f"log-sum-exp equal to torch.logsumexp on {len(cases)} cases (scores near +-1000, rows of "
                  "different sizes, dim 0, 1 and -1, masked scores and an all -inf row)")


def _softmax_cases(g: torch.Generator) -> list[tuple[str, Tensor, int]]:
    rows = torch.tensor([[1000.0, 999.0, 998.0], [-5.0, -4.0, -3.0], [0.5, -0.5, 0.0]])
    masked = (random_tensor(g, 2, 4, scale=5.0)).masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril()[:2], -_INF)
    return [
        ("small scores, dim=-1", random_tensor(g, 3, 5), -1),
        ("the lesson's scores [1000, 999, 800]", torch.tensor([1000.0, 999.0, 800.0]), 0),
        ("a square matrix of rows of very different sizes, dim=-1", rows, -1),
        ("a 3-D input, dim=1", random_tensor(g, 2, 3, 4, scale=30.0) + 500.0, 1),
        ("scores with masked keys (-inf)", masked, -1),
    ]


@isolated(avoid=("torch:softmax", "torch.nn.functional:softmax", "torch.special:softmax", "torch:log_softmax",
                  "torch.nn.functional:log_softmax", "torch.special:log_softmax", "torch:logsumexp",
                  "torch.special:logsumexp"),
          builds='the softmax from max, exp and sum', allow=())
def check_stable_softmax(fn: Callable[[Tensor, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(x, dim)`` against :func:`torch.softmax`: exp(x - LSE(x)) over ``dim``, finite on large scores.

    Args:
        fn: the learner's function (lesson 03: softmax(x)_i = exp(x_i - LSE(x))).
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = _softmax_cases(make_rng())
    for case, x, dim in cases:
        text = f"{callable_name(fn)}(x {shape_text(x)}, dim={dim}) [{case}]"
        given = expect_tensor(_call_explained(fn, x, dim, text=text, in_place="changed x in place: compute new "
                                              "tensors instead"), text, f"of shape {shape_text(x)}")
        expected = torch.softmax(x, dim=dim)
        expect_shape(given, expected.shape, text, "softmax", {
            _without(x.shape, dim): "The softmax has the shape of x: one weight per entry, not one number per row.",
        })
        # exp(x - LSE(x)) inherits LSE's rounding: near 1000, float32 keeps about 4 decimals, so a right
        # answer can be off by a few 1e-5 relative to torch.softmax (which divides by the sum instead).
        tolerance = {"atol": 1e-5, "rtol": 3e-4}
        if all_close(given, expected, **tolerance):
            continue
        lse = torch.logsumexp(x, dim=dim, keepdim=True)
        mistakes = [
            ("You computed exp(x) / sum(exp(x)) as written: exp(1000) is inf in float32 and inf / inf is NaN. "
             "Write it as exp(x - LSE(x)) with your my_logsumexp, which never overflows.",
             lambda: torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)),
            ("my_logsumexp(x, dim) has the reduced axis removed; subtracting it from x broadcast it along the "
             "wrong axis (the matrix is square, so no error was raised). Put it back first: "
             "x - my_logsumexp(x, dim).unsqueeze(dim).",
             lambda: torch.exp(x - lse.squeeze(dim)) if x.dim() == 2 and x.size(0) == x.size(1) else None),
            ("You returned the log-probabilities x - LSE(x) (the log-softmax); the softmax is their exp.",
             lambda: x - lse),
            ("exp(x - max) is not normalised yet: subtract LSE(x), not the maximum, and the rows sum to 1.",
             lambda: torch.exp(x - x.amax(dim=dim, keepdim=True))),
        ]
        hint = known_mistake(given, mistakes, **tolerance)
        if hint is not None:
            raise AssertionError(f"{text}: wrong softmax. {hint}")
        if bool(torch.isnan(given).any()):
            raise AssertionError(f"{text}: your softmax contains NaN; every row here has a finite score, so it "
                                 "should not. Compute exp(x - LSE(x)) with the stable my_logsumexp.")
        sums = given.sum(dim=dim)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
            other = "" if x.dim() < 2 else (
                " Your softmax ran over another dimension: use dim, the argument, in my_logsumexp and when "
                "putting its axis back." if any(torch.allclose(given.sum(dim=d), torch.ones(1), atol=1e-4)
                                                 for d in range(x.dim()) if d != dim % x.dim()) else "")
            raise AssertionError(f"{text}: your softmax does not sum to 1 over dim={dim}.{other}")
        compare(given, expected, text, "softmax", **tolerance)
    report_passed(task, f"softmax as exp(x - LSE(x)) equal to torch.softmax on {len(cases)} cases (scores near 1000, "
                  "rows of different sizes, dim 0, 1 and -1, masked scores)")


