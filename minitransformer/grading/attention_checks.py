"""Checks for exercises 01: positional encoding, attention, masks (lessons 02, 03 and 06)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..embeddings import sinusoidal_positional_encoding
from ..masks import make_causal_mask, make_padding_mask
from ._common import (_call, _call_text, _compare, _describe, _expect_bool, _expect_shape, _expect_tensor, _isolated,
                      _name, _passed, _rand, _rng, _shape)

__all__ = ["check_causal_mask", "check_padding_mask", "check_positional_encoding", "check_scaled_dot_product_attention"]


def _pe_variant(max_len: int, d_model: int, *, pair_exponent: bool = True, per_column: bool = False,
                swap: bool = False, halves: bool = False, multiply: bool = False, start: int = 0) -> Tensor:
    """A positional-encoding table built with one of the usual mistakes."""
    pos = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    i = torch.arange(d_model // 2, dtype=torch.float64)  # pair index
    exponent = (2 * i if pair_exponent else i) / d_model
    freq = 10000.0 ** exponent if multiply else 10000.0 ** -exponent  # (d_model/2,)
    angle = pos * freq  # (max_len, d_model/2)
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    if halves:
        return torch.cat([first(angle), second(angle)], dim=1).float()
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = first(angle)
    odd_angle = pos * 10000.0 ** (-(2 * i + 1) / d_model) if per_column else angle
    pe[:, 1::2] = second(odd_angle)
    return pe.float()


@_isolated(avoid=("minitransformer.embeddings:sinusoidal_positional_encoding", "minitransformer.embeddings:PositionalEncoding"))
def check_positional_encoding(fn: Callable[[int, int], Tensor], *, task: int | str | None = None,
                              sizes: Sequence[tuple[int, int]] = ((1, 2), (6, 4), (50, 16), (20, 64))) -> None:
    """Check a sinusoidal positional-encoding table against :func:`sinusoidal_positional_encoding`.

    ``fn(max_len, d_model)`` must return the (max_len, d_model) table of section 3.5 (lesson 02):
    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model)).

    Args:
        fn: the learner's function.
        task: task number printed on success.
        sizes: the (max_len, d_model) tables compared.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for max_len, d_model in sizes:
        text = f"{_name(fn)}({max_len}, {d_model})"
        pe = _expect_tensor(_call(fn, max_len, d_model, text=text), text, f"of shape ({max_len}, {d_model})")
        _expect_shape(pe, (max_len, d_model), text, "table", {
            (d_model, max_len): "Rows are positions and columns are features: did you transpose the table?",
            (1, max_len, d_model): "Return the table itself, without a batch axis.",
        })
        if not pe.is_floating_point():
            raise AssertionError(f"{text} returned a {pe.dtype} table; expected floating-point numbers (float32)")
        expected = sinusoidal_positional_encoding(max_len, d_model)
        mistakes = [
            ("Even columns (0, 2, 4, ...) hold the sines and odd columns the cosines: you swapped sin and cos.",
             lambda: _pe_variant(max_len, d_model, swap=True)),
            ("Interleave them: sine in the even columns, cosine in the odd ones, not all sines first and then "
             "all cosines.", lambda: _pe_variant(max_len, d_model, halves=True)),
            ("Columns 2i and 2i+1 share one frequency 1/10000^(2i/d_model); yours uses 10000^(i/d_model) "
             "with i the pair index: the exponent needs the factor 2.",
             lambda: _pe_variant(max_len, d_model, pair_exponent=False)),
            ("The cosine in column 2i+1 uses the same exponent 2i/d_model as the sine in column 2i, "
             "not (2i+1)/d_model.", lambda: _pe_variant(max_len, d_model, per_column=True)),
            ("Divide the position by 10000^(2i/d_model) (the wavelengths grow along the columns); "
             "you multiplied.", lambda: _pe_variant(max_len, d_model, multiply=True)),
            ("Positions count from 0: row 0 is position 0, where every sine is 0 and every cosine is 1.",
             lambda: _pe_variant(max_len, d_model, start=1)),
        ]

        def row_zero(pe: Tensor = pe, d_model: int = d_model) -> str | None:
            want = torch.tensor([0.0, 1.0] * (d_model // 2))
            if not torch.allclose(pe[0].double(), want.double(), atol=1e-4):
                shown = ", ".join(f"{v:.2f}" for v in pe[0, :6].tolist())
                return (f"Row 0 (position 0) should be [0, 1, 0, 1, ...] since sin(0) = 0 and cos(0) = 1; "
                        f"yours starts [{shown}{', ...' if d_model > 6 else ''}].")
            return None

        _compare(pe, expected, text, "table", mistakes, atol=1e-4, rtol=1e-4, fallback=row_zero)
    _passed(task, f"sinusoidal positional encoding, {len(sizes)} table sizes: " + ", ".join(map(str, sizes)))


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
        ("self-attention (B, T, d_k)", _rand(g, 2, 4, 8), _rand(g, 2, 4, 8), _rand(g, 2, 4, 8), None),
        ("cross-attention with heads, Tq=3, Tk=5, d_k=8, d_v=6",
         _rand(g, 2, 2, 3, 8), _rand(g, 2, 2, 5, 8), _rand(g, 2, 2, 5, 6), None),
        ("a padding mask (B, 1, 1, Tk)",
         _rand(g, 2, 2, 3, 8), _rand(g, 2, 2, 5, 8), _rand(g, 2, 2, 5, 6), keep[:, None, None, :]),
        ("a causal mask (1, 1, T, T)", _rand(g, 2, 2, 4, 8), _rand(g, 2, 2, 4, 8), _rand(g, 2, 2, 4, 8),
         make_causal_mask(4)),
        ("a single key", _rand(g, 1, 3, 4), _rand(g, 1, 1, 4), _rand(g, 1, 1, 4), None),
    ]


@_isolated(avoid=("minitransformer.attention:scaled_dot_product_attention", "minitransformer.attention:MultiHeadAttention",
                   "torch.nn.functional:scaled_dot_product_attention", "torch.nn:MultiheadAttention"))
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
    for case, query, key, value, mask in _attention_cases(_rng()):
        args = (query, key, value) if mask is None else (query, key, value, mask)
        text = _call_text(fn, *args, names=("query", "key", "value", "mask")) + f" [{case}]"
        originals = [t.clone() for t in args]
        result = _call(fn, *args, text=text)
        if any(not torch.equal(a, b) for a, b in zip(args, originals)):
            raise AssertionError(f"{text} changed its inputs in place: compute new tensors instead "
                                 "(e.g. masked_fill, not masked_fill_)")
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
            raise AssertionError(f"{text} returned {_describe(result)}; expected a pair (output, weights)")
        out, weights = result
        _expect_tensor(out, text, "as the output")
        _expect_tensor(weights, text, "as the weights")
        expected_out, expected_w = scaled_dot_product_attention(query, key, value, mask)
        if weights.shape == expected_out.shape and out.shape == expected_w.shape and out.shape != weights.shape:
            raise AssertionError(f"{text} returned (weights, output): return (output, weights) in that order")
        _expect_shape(weights, expected_w.shape, text, "weights",
                      {tuple(expected_w.transpose(-2, -1).shape): "The weights are (..., Tq, Tk): one row per query."})
        _expect_shape(out, expected_out.shape, text, "output")
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
        _compare(weights, expected_w, text, "weights", mistakes)
        _compare(out, expected_out, text, "output", [
            ("Your weights are right, but they must average the values (weights @ value), not the keys.",
             lambda: expected_w @ key),
        ])
    _passed(task, "scaled dot-product attention, 5 cases (3-D and 4-D inputs, cross-attention, "
                  "padding and causal masks, a single key)")


@_isolated(avoid=("minitransformer.masks:make_padding_mask", "minitransformer.masks:make_target_mask"))
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
        text = f"{_name(fn)}(tokens {_shape(tokens)}, pad_id={pad_id})"
        mask = _expect_tensor(_call(fn, tokens, pad_id, text=text), text, "(the mask)")
        _expect_bool(mask, text)
        batch, length = tokens.shape
        _expect_shape(mask, (batch, 1, 1, length), text, "mask", {
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
    _passed(task, "padding mask, 3 batches (pad id 0 and 1, a sentence without padding, length 1)")


@_isolated(avoid=("minitransformer.masks:make_causal_mask", "minitransformer.masks:make_target_mask"))
def check_causal_mask(fn: Callable[[int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(size)`` against :func:`make_causal_mask`: bool (1, 1, T, T), lower triangle and diagonal True.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for size in (3, 1, 6):
        text = f"{_name(fn)}({size})"
        mask = _expect_tensor(_call(fn, size, text=text), text, "(the mask)")
        _expect_bool(mask, text)
        _expect_shape(mask, (1, 1, size, size), text, "mask", {
            (size, size): "Add two leading axes, (T, T) -> (1, 1, T, T), so it broadcasts over the batch and the heads.",
            (1, size, size): "Add one more leading axis: (1, 1, T, T) broadcasts over the batch and the heads.",
        })
        expected = make_causal_mask(size)
        if not torch.equal(mask, expected):
            square = torch.ones(size, size, dtype=torch.bool)
            if torch.equal(mask[0, 0], square.triu()):
                hint = ("Row t is query t and column s is key s: query t may see keys 0..t, the lower triangle "
                        "(tril). Yours lets every position see the future and not the past.")
            elif torch.equal(mask[0, 0], square.tril(-1)):
                hint = "A position may attend to itself: keep the diagonal (tril(), not tril(-1))."
            elif torch.equal(mask[0, 0], square.tril(1)):
                hint = ("tril(1) keeps one diagonal above the main one: position t would see position t + 1, the "
                        "token it must predict. Use tril() (diagonal 0): query t sees keys 0..t.")
            elif torch.equal(mask[0, 0], ~square.tril()):
                hint = "True means 'may attend': your mask allows exactly the future positions (it is inverted)."
            else:
                row, col = (int(i) for i in (mask[0, 0] != expected[0, 0]).nonzero()[0])
                hint = (f"Row {row} of your causal mask lets position {row} see position {col}, which is in its future."
                        if col > row else f"Row {row} of your causal mask hides position {col} from position {row}, "
                        "which may see itself and every earlier position.")
                hint += f" Expected\n{expected[0, 0].int()}\ngot\n{mask[0, 0].int()}"
            raise AssertionError(f"{text} gave the wrong mask. {hint}")
    _passed(task, "causal mask, sizes 1, 3 and 6")


def _register_questions() -> None:
    """The conceptual question of exercise 03 (added to question_checks.QUESTIONS)."""
    from .question_checks import QUESTIONS, _Question

    QUESTIONS.setdefault("02-pe-properties", _Question(
        title="properties of the sinusoidal encoding",
        correct=frozenset("ABD"),
        why=("each position up to max_len gets its own vector (A), every entry is a sine or cosine in [-1, 1] (B), "
             "and a fixed offset k is the same linear map M_k for every position (D); nothing is learned (C) and "
             "the formula gives a vector for any position, seen in training or not (E)"),
        wrong={
            frozenset("ABCD"): "C: the table is a formula of the position and the feature index; the paper "
                               "compares it with learned positions (Table 3, row E), but this one has no parameter.",
            frozenset("ABDE"): "E: the formula works for any position, so a longer sentence still gets vectors "
                               "(whether the model handles them well is another matter).",
            frozenset("AB"): "D as well: task 2 built the matrix M_k, and PE[p + k] = PE[p] @ M_k for every p.",
            frozenset("BD"): "A as well: the sines and cosines of many wavelengths together differ for every "
                             "position up to max_len (the lesson's table shows no two equal rows).",
        },
        hint="Go through the five statements one by one with the formula and your task 2 in mind.",
    ))
    QUESTIONS.setdefault("03-nan-rows", _Question(
        title="which masks make my_attention return a row of NaN",
        correct=frozenset("BC"),
        why=("a row is NaN exactly when its query may attend to no key: masking the padding queries' rows (B) "
             "and a sentence made only of padding (C); a padding mask (B, 1, 1, S) on sentences with at least "
             "one real token leaves every query a key (A), and the package's attention returns zeros (D)"),
        wrong={
            frozenset("ABC"): "A: every sentence keeps at least one real key, and a padding mask (B, 1, 1, S) hides "
                              "keys, never a whole row, so each query still has a key to attend to.",
            frozenset("B"): "C as well: when every token of a sentence is padding, each of its queries has only "
                            "-inf scores.",
            frozenset("C"): "B as well: (tokens != pad_id)[:, None, :, None] hides whole ROWS, those of the "
                            "padding queries, so their scores are all -inf.",
            frozenset("BCD"): "D: the package's scaled_dot_product_attention sets the weights of masked keys to 0 "
                              "after the softmax, so a row with no visible key becomes zeros, not NaN.",
            frozenset("A"): "A padding mask (B, 1, 1, S) hides keys; every sentence here has a real key, so no row "
                            "is empty. Look for masks that leave a query no key at all.",
        },
        hint="A row of weights is NaN when its query may attend to no key at all (all scores -inf, softmax 0/0).",
    ))


_register_questions()
