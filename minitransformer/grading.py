"""Automatic checks for the exercises, and the command that grades them.

For learners: every task of an exercise notebook (``exercises/``) ends with a check cell such as
``check_scaled_dot_product_attention(my_attention, task=2)``. The check runs your code on random
inputs and edge cases, compares it with the package's own implementation, and either prints
``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says what was expected, what your
code gave and, for the usual mistakes, what probably went wrong.

For instructors: ``python -m minitransformer.grading SUBMISSION.ipynb [FOLDER ...] [--json out.json]``
runs each notebook in a fresh kernel, restores the check cells from the original exercise, and
prints one table per submission (task, points, passed, message) and the totals.

The checks draw their inputs from their own seeded generator and leave the global random state
untouched, so calling one does not change what the rest of a notebook computes.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import functools
import json
import math
import multiprocessing
import re
import sys
import textwrap
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .config import TransformerConfig
from .decoding import greedy_decode
from .embeddings import sinusoidal_positional_encoding
from .layers import EncoderLayer, PositionwiseFeedForward
from .masks import make_causal_mask, make_padding_mask, make_target_mask
from .model import Transformer

__all__ = [
    "Report",
    "TaskResult",
    "check_causal_mask",
    "check_encoder_layer",
    "check_feed_forward",
    "check_greedy_decode",
    "check_label_smoothing_target",
    "check_layer_norm",
    "check_multi_head_attention",
    "check_padding_mask",
    "check_positional_encoding",
    "check_scaled_dot_product_attention",
    "check_target_mask",
    "grade_notebook",
    "main",
]

# The original exercises, used to restore check cells that a submission changed or deleted.
COURSE_EXERCISES = Path(__file__).resolve().parents[1] / "exercises"
_SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv
_Check = TypeVar("_Check", bound=Callable[..., None])


# ----------------------------------------------------------------------------------------------
# Helpers shared by the checks
# ----------------------------------------------------------------------------------------------

def _isolated(check: _Check) -> _Check:
    """Run a check without gradients and without touching the caller's random generators."""

    @functools.wraps(check)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        __tracebackhide__ = True  # IPython leaves the checker's own frames out of tracebacks
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            check(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _passed(task: int | str | None, summary: str) -> None:
    print(f"✓ Task {task} passed: {summary}" if task is not None else f"✓ passed: {summary}")


def _shape(t: Tensor | torch.Size | Sequence[int]) -> str:
    dims = tuple(t.shape) if isinstance(t, Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ")"


def _describe(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a {str(x.dtype).replace('torch.', '')} tensor {_shape(x)}"
    return repr(x)


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _call_text(fn: Any, *args: Any, names: Sequence[str] = ()) -> str:
    """``my_attention(query (2, 4, 8), key (2, 4, 8), ...)``: the call, with shapes instead of numbers."""
    parts = [f"{n} {_shape(a)}" if isinstance(a, Tensor) and n else _describe(a)
             for a, n in zip(args, [*names, *[""] * len(args)])]
    return f"{_name(fn)}(" + ", ".join(parts) + ")"


def _call(fn: Callable[..., Any], *args: Any, text: str | None = None) -> Any:
    """Call the learner's code; any error other than NotImplementedError becomes an explained AssertionError."""
    __tracebackhide__ = True
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except Exception as err:  # the learner's bug: say which call raised it
        raise AssertionError(f"{text or _call_text(fn, *args)} raised {type(err).__name__}: {err}") from err


def _build(cls: type[nn.Module], *args: Any) -> nn.Module:
    __tracebackhide__ = True
    module = _call(cls, *args, text=_call_text(cls, *args))
    if not isinstance(module, nn.Module):
        raise AssertionError(f"{_call_text(cls, *args)} built a {type(module).__name__}; expected a subclass of nn.Module")
    return module.eval()  # dropout off: the checks compare exact numbers


def _rng() -> torch.Generator:
    return torch.Generator().manual_seed(_SEED)


def _rand(g: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * scale


@torch.no_grad()
def _fill_parameters(module: nn.Module, g: torch.Generator, scale: float = 0.5) -> None:
    """Random values for every parameter, biases and LayerNorm gains included, so each one matters."""
    for name, p in module.named_parameters():
        if re.search(r"norm\d*\.weight$", name):  # LayerNorm gains stay near 1
            p.copy_(1.0 + _rand(g, *p.shape, scale=0.3))
        else:
            p.copy_(_rand(g, *p.shape, scale=scale / math.sqrt(p.size(-1)) if p.dim() > 1 else scale))


def _close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True)


def _expect_tensor(x: Any, text: str, wanted: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(x, Tensor):
        raise AssertionError(f"{text} returned {type(x).__name__}; expected a torch.Tensor {wanted}")
    return x


def _expect_shape(x: Tensor, shape: Sequence[int], text: str, what: str, hints: dict[tuple[int, ...], str] | None = None) -> None:
    __tracebackhide__ = True
    if tuple(x.shape) != tuple(shape):
        hint = (hints or {}).get(tuple(x.shape), "")
        raise AssertionError(f"{text}: the {what} has shape {_shape(x)} but expected {_shape(shape)}." + (f" {hint}" if hint else ""))


def _expect_bool(x: Tensor, text: str) -> None:
    __tracebackhide__ = True
    if x.dtype != torch.bool:
        raise AssertionError(
            f"{text} returned a {str(x.dtype).replace('torch.', '')} tensor; a mask must be torch.bool "
            "(True = may attend). A comparison such as `tokens != pad_id` already gives one."
        )


def _first_difference(given: Tensor, expected: Tensor, atol: float, rtol: float) -> str:
    given, expected = given.double(), expected.double()
    bad = ~torch.isclose(given, expected, atol=atol, rtol=rtol, equal_nan=True)
    index = tuple(int(i) for i in bad.nonzero()[0])
    n_bad = int(bad.sum())
    return (f"at index {index} expected {expected[index].item():.4f} but got {given[index].item():.4f} "
            f"({n_bad} of {given.numel()} values differ)")


def _compare(given: Tensor, expected: Tensor, text: str, what: str,
             mistakes: Sequence[tuple[str, Callable[[], Tensor | None]]] = (), atol: float = 1e-5,
             rtol: float = 1e-4, fallback: Callable[[], str | None] | None = None) -> None:
    """Raise unless ``given`` matches ``expected``; name the mistake when ``given`` matches a known wrong version."""
    __tracebackhide__ = True
    _expect_shape(given, expected.shape, text, what)
    if _close(given, expected, atol, rtol):
        return
    for hint, wrong in mistakes:
        try:
            candidate = wrong()
        except Exception:  # a mistake that does not apply to these shapes
            continue
        if candidate is not None and _close(given, candidate, atol, rtol):
            raise AssertionError(f"{text}: wrong {what}. {hint}")
    extra = fallback() if fallback is not None else None
    raise AssertionError(f"{text}: wrong {what}: "
                         f"{_first_difference(given, expected, atol, rtol)}." + (f" {extra}" if extra else ""))


def _linear_like(module: nn.Module, name: str, in_features: int, out_features: int, owner: str) -> nn.Module:
    """The learner's ``owner.name``, checked to be an ``nn.Linear(in_features, out_features)`` with a bias."""
    __tracebackhide__ = True
    layer = getattr(module, name, None)
    wanted = f"nn.Linear({in_features}, {out_features})"
    if layer is None:
        raise AssertionError(f"{owner} has no attribute `{name}`: create it in __init__ as self.{name} = {wanted}")
    weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    if not isinstance(weight, Tensor):
        raise AssertionError(f"{owner}.{name} is a {type(layer).__name__}; expected {wanted}")
    if tuple(weight.shape) != (out_features, in_features):
        hint = " (nn.Linear(in, out) stores its weight as (out, in): are in and out swapped?)" \
            if tuple(weight.shape) == (in_features, out_features) else ""
        raise AssertionError(f"{owner}.{name}.weight has shape {_shape(weight)} but {wanted} has "
                             f"{_shape((out_features, in_features))}{hint}")
    if not isinstance(bias, Tensor) or tuple(bias.shape) != (out_features,):
        raise AssertionError(f"{owner}.{name} must have a bias of shape ({out_features},) like {wanted} "
                             "(the paper's projections have one): drop bias=False")
    return layer


def _first_output(out: Any) -> Any:
    """A module may return its output alone or ``(output, weights)`` like the package; take the output."""
    return out[0] if isinstance(out, (tuple, list)) and len(out) > 0 else out


# ----------------------------------------------------------------------------------------------
# Exercises 01: positional encoding, attention, masks (lessons 02, 03 and 06)
# ----------------------------------------------------------------------------------------------

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


@_isolated
def check_positional_encoding(fn: Callable[[int, int], Tensor], *, task: int | str | None = None) -> None:
    """Check a sinusoidal positional-encoding table against :func:`sinusoidal_positional_encoding`.

    ``fn(max_len, d_model)`` must return the (max_len, d_model) table of section 3.5 (lesson 02):
    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model)).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for max_len, d_model in ((1, 2), (6, 4), (50, 16), (20, 64)):
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
    _passed(task, "sinusoidal positional encoding, 4 table sizes from (1, 2) to (50, 16) and (20, 64)")


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


@_isolated
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


@_isolated
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


@_isolated
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
            elif torch.equal(mask[0, 0], ~square.tril()):
                hint = "True means 'may attend': your mask allows exactly the future positions (it is inverted)."
            else:
                hint = f"expected\n{expected[0, 0].int()}\ngot\n{mask[0, 0].int()}"
            raise AssertionError(f"{text} gave the wrong mask. {hint}")
    _passed(task, "causal mask, sizes 1, 3 and 6")


# ----------------------------------------------------------------------------------------------
# Exercises 02: multi-head attention, LayerNorm, feed-forward, encoder layer (lessons 04 and 05)
# ----------------------------------------------------------------------------------------------

def _mha_by_hand(ref: MultiHeadAttention, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, *,
                 scale: str | None = "d_k", split: str = "right", merge: str = "right", softmax_dim: int = -1,
                 use_w_o: bool = True, invert_mask: bool = False, n_heads: int | None = None) -> Tensor:
    """Multi-head attention from ``ref``'s weights, with one of the usual mistakes switched on."""
    batch, _, d_model = query.shape
    h = n_heads or ref.n_heads
    d_k = d_model // h

    def heads(x: Tensor) -> Tensor:
        length = x.size(1)
        if split == "no_transpose":
            return x.reshape(batch, h, length, d_k)  # (B, H, T, Dk), mixing positions
        if split == "interleaved":
            return x.view(batch, length, d_k, h).permute(0, 3, 1, 2)  # head i takes features i, i+H, ...
        return x.view(batch, length, h, d_k).transpose(1, 2)  # (B, H, T, Dk)

    q, k, v = heads(ref.w_q(query)), heads(ref.w_k(key)), heads(ref.w_v(value))
    scores = q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)
    if scale is not None:
        scores = scores / math.sqrt(d_k if scale == "d_k" else d_model)
    if mask is not None:
        scores = scores.masked_fill(mask if invert_mask else ~mask, float("-inf"))
    out = torch.softmax(scores, dim=softmax_dim) @ v  # (B, H, Tq, Dk)
    length = out.size(2)
    if merge == "no_transpose":
        concat = out.reshape(batch, length, d_model)
    elif merge == "interleaved":
        concat = out.permute(0, 2, 3, 1).reshape(batch, length, d_model)
    else:
        concat = out.transpose(1, 2).reshape(batch, length, d_model)  # (B, Tq, D)
    return ref.w_o(concat) if use_w_o else concat


_SPLIT_HINT = ("Split each projection into heads by viewing it as (B, T, n_heads, d_k) and then transposing to "
               "(B, n_heads, T, d_k); a direct view or reshape to (B, n_heads, T, d_k) mixes the positions.")
_MERGE_HINT = ("Concatenate the heads by transposing (B, n_heads, T, d_k) back to (B, T, n_heads, d_k) before "
               "reshaping to (B, T, d_model).")


def _mha_mistakes(ref: MultiHeadAttention, q: Tensor, k: Tensor, v: Tensor,
                  mask: Tensor | None) -> list[tuple[str, Callable[[], Tensor]]]:
    d_k, d_model = ref.d_k, ref.d_model

    def wrong(**kw: Any) -> Callable[[], Tensor]:
        return lambda: _mha_by_hand(ref, q, k, v, mask, **kw)

    mistakes = [
        ("The scores of each head must be divided by sqrt(d_k); yours are not scaled.", wrong(scale=None)),
        (f"Divide by sqrt(d_k) = sqrt(d_model / n_heads) = {math.sqrt(d_k):.3f}, the width of one head, "
         f"not by sqrt(d_model) = {math.sqrt(d_model):.3f}.", wrong(scale="d_model")),
        (_SPLIT_HINT + " " + _MERGE_HINT, wrong(split="no_transpose", merge="no_transpose")),
        (_SPLIT_HINT, wrong(split="no_transpose")),
        (_MERGE_HINT, wrong(merge="no_transpose")),
        ("Head i takes the contiguous block of features i*d_k ... (i+1)*d_k - 1: view the projections as "
         "(B, T, n_heads, d_k), not (B, T, d_k, n_heads).", wrong(split="interleaved", merge="interleaved")),
        ("Apply the output projection w_o to the concatenated heads.", wrong(use_w_o=False)),
        ("Apply the softmax over the keys (the last dimension), not over the queries.", wrong(softmax_dim=-2)),
        ("Your output is that of one single head over all d_model features: split the projections into "
         "n_heads heads of d_k features each.", wrong(n_heads=1, scale="d_model")),
    ]
    if mask is not None:
        mistakes += [
            ("True in the mask means 'may attend': your mask hides the keys it should keep.", wrong(invert_mask=True)),
            ("The mask has no effect on your output: pass it to the attention of every head "
             "(scores.masked_fill(~mask, float('-inf'))); it broadcasts over the heads axis.",
             lambda: _mha_by_hand(ref, q, k, v, None)),
        ]
    return mistakes


def _copy_linear(target: nn.Module, source: nn.Linear) -> None:
    target.weight.copy_(source.weight)  # type: ignore[operator]
    target.bias.copy_(source.bias)  # type: ignore[operator,union-attr]


def _mha_cases(g: torch.Generator) -> list[tuple[str, int, int, Tensor, Tensor, Tensor | None]]:
    keep = torch.tensor([[True, True, True, True, False], [True, True, False, False, False]])
    return [
        ("self-attention, d_model=8, n_heads=2", 8, 2, _rand(g, 2, 3, 8), _rand(g, 2, 3, 8), None),
        ("cross-attention with a padding mask, d_model=12, n_heads=3", 12, 3, _rand(g, 2, 2, 12), _rand(g, 2, 5, 12),
         keep[:, None, None, :]),
        ("self-attention with a causal mask, d_model=8, n_heads=2", 8, 2, _rand(g, 2, 4, 8), _rand(g, 2, 4, 8),
         make_causal_mask(4)),
        ("one head, d_model=8, n_heads=1", 8, 1, _rand(g, 1, 3, 8), _rand(g, 1, 3, 8), None),
        ("d_k = 1, d_model=4, n_heads=4", 4, 4, _rand(g, 2, 3, 4), _rand(g, 2, 2, 4), None),
    ]


@_isolated
def check_multi_head_attention(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a multi-head attention class against :class:`MultiHeadAttention` with the same weights.

    ``cls(d_model, n_heads)`` must hold four ``nn.Linear(d_model, d_model)`` named ``w_q``, ``w_k``,
    ``w_v``, ``w_o``; its ``forward(query, key, value, mask=None)`` returns (B, Tq, d_model) (or a
    tuple whose first element is that). The package's weights are copied in, the outputs compared
    (section 3.2.2, lesson 04).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    for case, d_model, n_heads, query, memory, mask in _mha_cases(g):
        mine = _build(cls, d_model, n_heads)
        owner = f"{_name(cls)}({d_model}, {n_heads})"
        ref = MultiHeadAttention(d_model, n_heads).eval()
        _fill_parameters(ref, g)
        for name in ("w_q", "w_k", "w_v", "w_o"):
            _copy_linear(_linear_like(mine, name, d_model, d_model, owner), getattr(ref, name))
        key = value = memory
        args = (query, key, value) if mask is None else (query, key, value, mask)
        text = _call_text(mine, *args, names=("query", "key", "value", "mask")).replace(
            _name(mine), f"{owner}.forward", 1) + f" [{case}]"
        out = _expect_tensor(_first_output(_call(mine, *args, text=text)), text, "as the output")
        expected = ref(query, key, value, mask)[0]
        _expect_shape(out, expected.shape, text, "output")
        _compare(out, expected, text, "output", _mha_mistakes(ref, query, key, value, mask))
    _passed(task, "multi-head attention, 5 cases (self- and cross-attention, padding and causal masks, "
                  "1 to 4 heads, d_k from 1 to 8)")


def _layer_norm_variant(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, correction: int = 0,
                        eps_outside: bool = False, dim: int = -1, affine: bool = True, swap: bool = False) -> Tensor:
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, correction=correction)
    normed = (x - mean) / (var.sqrt() + eps) if eps_outside else (x - mean) / torch.sqrt(var + eps)
    if not affine:
        return normed
    return normed * bias + weight if swap else normed * weight + bias


@_isolated
def check_layer_norm(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a LayerNorm class against ``F.layer_norm`` (the package's :class:`LayerNorm` computes the same).

    ``cls(d_model)`` must hold parameters ``weight`` (gamma, ones at first) and ``bias`` (beta, zeros)
    of shape (d_model,) and use eps = 1e-5; ``forward(x)`` normalises each position over its last
    dimension with the biased variance (lesson 05).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, eps = 6, 1e-5
    norm = _build(cls, d_model)
    owner = f"{_name(cls)}({d_model})"
    params = dict(norm.named_parameters())
    for name, start, role in (("weight", 1.0, "gamma"), ("bias", 0.0, "beta")):
        if name not in params:
            found = ", ".join(params) or "none"
            plain = isinstance(getattr(norm, name, None), Tensor)
            raise AssertionError(
                f"{owner} has no parameter `{name}`" + (
                    f": self.{name} is a plain tensor; wrap it in nn.Parameter so the optimizer learns it" if plain
                    else f" (its parameters: {found}): name {role} `{name}`, as nn.LayerNorm does")
            )
        p = params[name]
        if tuple(p.shape) != (d_model,):
            raise AssertionError(f"{owner}.{name} has shape {_shape(p)}; expected ({d_model},), one {role} per feature")
        if not torch.allclose(p, torch.full_like(p, start)):
            raise AssertionError(f"{owner}.{name} ({role}) should start at {start:g} everywhere, so that a new layer "
                                 f"only normalises; it starts at {p.detach().flatten()[:3].tolist()}...")
    weight, bias = 1.0 + _rand(g, d_model, scale=0.5), _rand(g, d_model, scale=0.5)
    params["weight"].copy_(weight)
    params["bias"].copy_(bias)
    constant = _rand(g, 2, 3, d_model)
    constant[0, 1] = 0.7  # a position whose features are all equal: variance 0
    cases = [
        ("(B, T, D) input with a mean far from 0", 3.0 + 2.0 * _rand(g, 2, 3, d_model)),
        ("(T, D) input", _rand(g, 4, d_model)),
        ("small variance, where eps matters", 0.01 * _rand(g, 2, 3, d_model)),
        ("a position with variance 0", constant),
    ]
    for case, x in cases:
        text = f"{owner}.forward(x {_shape(x)}) [{case}]"
        out = _expect_tensor(_call(norm, x, text=text), text, f"of shape {_shape(x)}")
        expected = F.layer_norm(x, (d_model,), weight, bias, eps)
        if out.shape == expected.shape and torch.isnan(out).any():
            raise AssertionError(f"{text}: your output contains NaN. A position whose features are all equal has "
                                 "variance 0; eps inside the square root, sqrt(var + eps), keeps it finite.")

        def variant(**kw: Any) -> Callable[[], Tensor]:
            return lambda: _layer_norm_variant(x, weight, bias, eps, **kw)

        mistakes = [
            ("Your output matches the unbiased variance (dividing by d_model - 1, torch.var's default): layer "
             "normalization uses the biased one, x.var(dim=-1, unbiased=False) or ((x - mean)**2).mean(-1).",
             variant(correction=1)),
            ("Put eps inside the square root, sqrt(var + eps), not after it.", variant(eps_outside=True)),
            ("eps is missing: divide by sqrt(var + eps) with eps = 1e-5.",
             lambda: _layer_norm_variant(x, weight, bias, 0.0)),
            ("Normalise each position over its d_model features, the last dimension (dim=-1), not over the batch.",
             variant(dim=0)),
            ("Normalise each position over its d_model features, the last dimension (dim=-1), not over the positions.",
             variant(dim=-2)),
            ("After normalising, multiply by self.weight (gamma) and add self.bias (beta).", variant(affine=False)),
            ("gamma (self.weight) multiplies and beta (self.bias) is added: you swapped them.", variant(swap=True)),
        ]
        _compare(out, expected, text, "output", mistakes, atol=1e-4, rtol=1e-4)
    _passed(task, "layer normalization, 4 inputs (3-D, 2-D, small variance, a constant position), gamma and beta used")


@_isolated
def check_feed_forward(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a position-wise feed-forward class against :class:`PositionwiseFeedForward`.

    ``cls(d_model, d_ff)`` must hold ``linear1 = nn.Linear(d_model, d_ff)`` and
    ``linear2 = nn.Linear(d_ff, d_model)``; ``forward(x)`` computes max(0, x W1 + b1) W2 + b2 at
    every position (section 3.3, lesson 05). It is called in eval mode, so dropout is off.

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, d_ff = 8, 32
    ffn = _build(cls, d_model, d_ff)
    owner = f"{_name(cls)}({d_model}, {d_ff})"
    ref = PositionwiseFeedForward(d_model, d_ff, dropout=0.0).eval()
    _fill_parameters(ref, g, scale=1.0)
    _copy_linear(_linear_like(ffn, "linear1", d_model, d_ff, owner), ref.linear1)
    _copy_linear(_linear_like(ffn, "linear2", d_ff, d_model, owner), ref.linear2)
    for case, x in (("(B, T, D)", _rand(g, 2, 5, d_model)), ("(T, D)", _rand(g, 3, d_model)),
                    ("one position", _rand(g, 1, 1, d_model))):
        text = f"{owner}.forward(x {_shape(x)}) [{case}]"
        out = _expect_tensor(_call(ffn, x, text=text), text, f"of shape {_shape(x)}")
        expected = ref(x)
        mistakes = [
            ("The ReLU between the two layers is missing: max(0, x W1 + b1) W2 + b2.",
             lambda: ref.linear2(ref.linear1(x))),
            ("Only one ReLU, between the two layers: the output of linear2 is not passed through it.",
             lambda: torch.relu(ref(x))),
            ("The paper's activation is the ReLU, max(0, .), not the GELU.",
             lambda: ref.linear2(F.gelu(ref.linear1(x)))),
            ("The ReLU comes after linear1, not before it.", lambda: ref.linear2(ref.linear1(torch.relu(x)))),
        ]
        _compare(out, expected, text, "output", mistakes)
    _passed(task, "position-wise feed-forward, 3 inputs ((B, T, D), (T, D), one position)")


def _encoder_by_hand(ref: EncoderLayer, x: Tensor, mask: Tensor | None, *, order: str = "post",
                     swap_norms: bool = False, use_mask: bool = True) -> Tensor:
    """An encoder layer from ``ref``'s parts, wired right (``order="post"``) or in a usual wrong way."""
    def attn(h: Tensor) -> Tensor:
        return ref.self_attn(h, h, h, mask if use_mask else None)[0]

    ffn = ref.feed_forward
    n1, n2 = (ref.norm2, ref.norm1) if swap_norms else (ref.norm1, ref.norm2)
    if order == "pre":
        x = x + attn(n1(x))
        return x + ffn(n2(x))
    if order == "no_residual":
        return n2(ffn(n1(attn(x))))
    if order == "no_norm":
        x = x + attn(x)
        return x + ffn(x)
    if order == "norm_inside":
        x = x + n1(attn(x))
        return x + n2(ffn(x))
    x = n1(x + attn(x))
    return n2(x + ffn(x))


@_isolated
def check_encoder_layer(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a post-LN encoder layer against :class:`EncoderLayer` with the same weights.

    ``cls(d_model, n_heads, d_ff)`` must hold ``self_attn`` (with ``w_q``, ``w_k``, ``w_v``, ``w_o``),
    ``feed_forward`` (with ``linear1``, ``linear2``), ``norm1`` and ``norm2`` (with ``weight`` and
    ``bias``); ``forward(x, src_mask=None)`` computes x = LayerNorm(x + SelfAttention(x)), then
    LayerNorm(x + FFN(x)) (section 3.1, lesson 05). Called in eval mode, so dropout is off.

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    d_model, n_heads, d_ff = 8, 2, 16
    layer = _build(cls, d_model, n_heads, d_ff)
    owner = f"{_name(cls)}({d_model}, {n_heads}, {d_ff})"
    ref = EncoderLayer(d_model, n_heads, d_ff, dropout=0.0).eval()
    _fill_parameters(ref, g)
    mine = dict(layer.named_parameters())
    missing = [name for name in dict(ref.named_parameters()) if name not in mine]
    if missing:
        raise AssertionError(
            f"{owner} has no parameter {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}: name its parts "
            "self_attn (holding w_q, w_k, w_v, w_o), feed_forward (holding linear1, linear2), norm1 and norm2 "
            "(holding weight and bias), so the package's weights can be copied in. Its parameters are: "
            f"{', '.join(sorted(mine)) or 'none'}."
        )
    for name, p in ref.named_parameters():
        if mine[name].shape != p.shape:
            raise AssertionError(f"{owner}: parameter {name} has shape {_shape(mine[name])} but the package's has {_shape(p)}")
        mine[name].copy_(p)

    # The parts first, so that a bug in an earlier task is reported as such.
    x = _rand(g, 2, 5, d_model)
    parts: list[tuple[str, Callable[[], Any], Tensor, str]] = [
        ("self_attn", lambda: _first_output(layer.self_attn(x, x, x)), ref.self_attn(x, x, x)[0], "multi-head attention (task 1)"),
        ("feed_forward", lambda: layer.feed_forward(x), ref.feed_forward(x), "the feed-forward network (task 3)"),
        ("norm1", lambda: layer.norm1(x), ref.norm1(x), "layer normalization (task 2)"),
    ]
    for part, run, expected, what in parts:
        text = f"{owner}.{part}(x {_shape(x)})"
        got = _call(run, text=text)
        if not isinstance(got, Tensor) or not _close(got, expected, 1e-4, 1e-4):
            raise AssertionError(f"{text} does not compute {what} like the package: make that task pass first, "
                                 "or use the package's class for this part.")

    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    for case, x, mask in (("no mask", _rand(g, 2, 5, d_model), None),
                          ("a padding mask (B, 1, 1, S)", _rand(g, 2, 5, d_model), keep[:, None, None, :]),
                          ("one position", _rand(g, 1, 1, d_model), None)):
        args = (x,) if mask is None else (x, mask)
        text = f"{owner}.forward(" + ", ".join(f"{n} {_shape(a)}" for n, a in zip(("x", "src_mask"), args)) + f") [{case}]"
        out = _expect_tensor(_first_output(_call(layer, *args, text=text)), text, f"of shape {_shape(x)}")
        expected = ref(x, mask)

        def variant(x: Tensor = x, mask: Tensor | None = mask, **kw: Any) -> Callable[[], Tensor]:
            return lambda: _encoder_by_hand(ref, x, mask, **kw)

        mistakes = [
            ("Your layer is pre-LN, x + Sublayer(LayerNorm(x)); the paper (and this task) is post-LN: "
             "x = LayerNorm(x + Sublayer(x)).", variant(order="pre")),
            ("LayerNorm goes after the residual addition: LayerNorm(x + Sublayer(x)), not x + LayerNorm(Sublayer(x)).",
             variant(order="norm_inside")),
            ("The residual connections are missing: add the sub-layer's input to its output, LayerNorm(x + Sublayer(x)).",
             variant(order="no_residual")),
            ("The LayerNorms are missing: x = LayerNorm(x + Sublayer(x)) after each sub-layer.", variant(order="no_norm")),
            ("norm1 belongs to the attention sub-layer and norm2 to the feed-forward one: you swapped them.",
             variant(swap_norms=True)),
            ("The mask has no effect: pass src_mask to the self-attention.", variant(use_mask=False)),
        ]
        _compare(out, expected, text, "output", mistakes)
    _passed(task, "post-LN encoder layer, its parts and 3 inputs (no mask, a padding mask, one position)")


# ----------------------------------------------------------------------------------------------
# Exercises 03: target mask, label smoothing, greedy decoding (lessons 06 and 07)
# ----------------------------------------------------------------------------------------------

@_isolated
def check_target_mask(fn: Callable[[Tensor, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(tgt, pad_id)`` against :func:`make_target_mask`: padding & causal, bool (B, 1, T, T).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [
        (torch.tensor([[1, 5, 6, 7, 0, 0], [1, 8, 9, 4, 5, 2]]), 0),
        (torch.tensor([[1, 4, 3, 3], [1, 3, 3, 3]]), 3),
        (torch.tensor([[1]]), 0),
    ]
    for tgt, pad_id in cases:
        text = f"{_name(fn)}(tgt {_shape(tgt)}, pad_id={pad_id})"
        mask = _expect_tensor(_call(fn, tgt, pad_id, text=text), text, "(the mask)")
        _expect_bool(mask, text)
        batch, length = tgt.shape
        _expect_shape(mask, (batch, 1, length, length), text, "mask", {
            (batch, length, length): "Keep the heads axis: (B, 1, T, T) broadcasts over the heads.",
            (1, 1, length, length): "The padding differs between sentences, so the mask has one (T, T) block per "
                                    "sentence: (B, 1, T, T).",
            (batch, 1, 1, length): "The causal part is missing: each query t may only see keys 0..t.",
        })
        expected = make_target_mask(tgt, pad_id)
        if torch.equal(mask, expected):
            continue
        pad, causal = make_padding_mask(tgt, pad_id), make_causal_mask(length)
        query_pad = (tgt != pad_id)[:, None, :, None] & causal
        hints = [
            (pad | causal, "Combine the two masks with & (and): a key must be a real token AND not in the future."),
            (causal.expand_as(expected), "Padding keys must be hidden too: combine the causal mask with the padding mask."),
            (pad.expand_as(expected), "The future must be hidden too: combine the padding mask with the causal mask."),
            (query_pad, "The padding mask hides keys, the columns: its shape is (B, 1, 1, T), not (B, 1, T, 1)."),
            (~expected, "True means 'may attend': your mask is inverted."),
        ]
        hint = next((h for wrong, h in hints if torch.equal(mask, wrong)),
                    f"expected for sentence 0\n{expected[0, 0].int()}\ngot\n{mask[0, 0].int()}")
        raise AssertionError(f"{text} gave the wrong mask. {hint}")
    _passed(task, "target mask, 3 batches (pad id 0 and 3, length 1)")


def _smoothed_targets_reference(target: Tensor, vocab_size: int, epsilon: float, pad_id: int) -> Tensor:
    """q(gold) = 1 - eps, q(pad) = 0, eps / (V - 2) elsewhere; all zeros where the target is padding."""
    q = torch.full((*target.shape, vocab_size), epsilon / (vocab_size - 2))
    q[..., pad_id] = 0.0
    q.scatter_(-1, target[..., None], 1.0 - epsilon)
    return q.masked_fill((target == pad_id)[..., None], 0.0)  # (B, T, V)


@_isolated
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
    with warnings.catch_warnings():  # the training package imports tqdm.auto, which may warn in a kernel
        warnings.simplefilter("ignore")
        from .training.loss import label_smoothed_nll

    g = _rng()
    cases = [
        (torch.tensor([[4, 5, 2, 0, 0], [3, 6, 6, 4, 2]]), 7, 0.1, 0),
        (torch.tensor([[2, 0, 3], [1, 1, 1]]), 5, 0.2, 1),
        (torch.tensor([[3, 4]]), 6, 0.0, 0),
    ]
    for target, vocab, eps, pad_id in cases:
        text = f"{_name(fn)}(target {_shape(target)}, vocab_size={vocab}, epsilon={eps}, pad_id={pad_id})"
        q = _expect_tensor(_call(fn, target, vocab, eps, pad_id, text=text), text, "of shape (B, T, V)")
        _expect_shape(q, (*target.shape, vocab), text, "q", {
            (target.numel(), vocab): "Keep the (B, T) axes: q is (B, T, V), one distribution per position.",
        })
        if not q.is_floating_point():
            raise AssertionError(f"{text} returned a {q.dtype} tensor; probabilities are floating-point numbers")
        expected = _smoothed_targets_reference(target, vocab, eps, pad_id)
        real = target != pad_id
        uniform = F.one_hot(target, vocab) * (1 - eps) + eps / vocab  # (B, T, V)
        if eps > 0 and _close(q[real], uniform[real], 1e-5, 1e-4):
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
        _compare(q, expected, text, "q", [
            ("The gold token gets exactly 1 - eps.", lambda: _smoothed_targets_reference(target, vocab, 0.0, pad_id)),
        ])
        logits = _rand(g, *target.shape, vocab)
        ours = -(q * torch.log_softmax(logits, dim=-1)).sum()
        assert torch.allclose(ours, label_smoothed_nll(logits, target, eps, pad_id)[0], atol=1e-4), (
            f"{text}: the cross-entropy -sum q log p with your q differs from label_smoothed_nll"
        )
    _passed(task, "label-smoothed targets, 3 batches (eps 0.1, 0.2 and 0, pad id 0 and 1); "
                  "their cross-entropy equals label_smoothed_nll")


def _greedy_by_hand(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int, *,
                    first_position: bool = False, pass_src_mask: bool = True, stop: bool = True,
                    pad_after_end: bool = True) -> Tensor:
    """Greedy decoding with one of the usual mistakes switched on (all off = :func:`greedy_decode`)."""
    pad_id = model.config.pad_id
    src_mask = make_padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        hidden = model.decode(ys, memory, src_mask if pass_src_mask else None)  # (B, t, D)
        token = model.generator(hidden[:, 0 if first_position else -1]).argmax(-1)  # (B,)
        if pad_after_end:
            token = token.masked_fill(finished, pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if stop and bool(finished.all()):
            break
    return ys


@torch.no_grad()
def _decoding_model(seed: int) -> Transformer:
    """A small random model whose greedy outputs depend on the source (tokens 0, 1, 2 are pad, bos, eos)."""
    torch.manual_seed(seed)
    config = TransformerConfig.tiny(11, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                    dropout=0.0, tie_embeddings=False)
    model = Transformer(config).eval()
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0.0, 0.5)
    # A trained model never predicts padding or the start token; this one must not either.
    model.generator = nn.Linear(config.d_model, config.tgt_vocab_size)
    model.generator.weight.normal_(0.0, 0.5)
    model.generator.bias.zero_()
    model.generator.bias[[config.pad_id, 1]] = -1e4
    return model


def _end_rows(out: Tensor, eos_id: int) -> list[int | None]:
    return [row.index(eos_id) if eos_id in row else None for row in out.tolist()]


@_isolated
def check_greedy_decode(fn: Callable[..., Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(model, src, max_len, bos_id, eos_id) -> (B, 1 + L)`` against :func:`greedy_decode`.

    The tokens start with ``bos_id``; each sentence stops at its own ``eos_id`` and is padded with
    ``model.config.pad_id`` after it; the loop ends when all have ended or after ``max_len`` new
    tokens (lesson 06). Small random models with several end-token choices are used, so that
    sentences end at different steps, all end early, or none ends.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    bos, max_len = 1, 7
    n_cases = 0
    for seed in (0, 1, 2):
        model = _decoding_model(seed)
        src = torch.randint(3, 11, (6, 5), generator=g)
        src[3:, 3:] = model.config.pad_id  # three shorter sentences, padded
        # End tokens that make the references differ: ends at different steps, all early, never.
        endings: dict[str, int] = {}
        for eos in range(2, 11):
            ends = _end_rows(greedy_decode(model, src, max_len, bos, eos, use_cache=False), eos)
            if None in ends and len(set(ends)) > 1:
                endings.setdefault("some sentences end, at different steps, others never", eos)
            elif None not in ends:
                endings.setdefault("every sentence ends early", eos)
            elif all(e is None for e in ends):
                endings.setdefault("no sentence ends", eos)
        for case, eos in endings.items():
            n_cases += 1
            for rows in (slice(0, 1), slice(None)):  # one sentence first, then the batch
                batch = src[rows]
                text = (f"{_name(fn)}(model, src {_shape(batch)}, max_len={max_len}, bos_id={bos}, eos_id={eos}) "
                        f"[{case}]")
                out = _expect_tensor(_call(fn, model, batch, max_len, bos, eos, text=text), text, "of token ids")
                expected = greedy_decode(model, batch, max_len, bos, eos, use_cache=False)
                if out.dim() != 2 or out.size(0) != batch.size(0):
                    raise AssertionError(f"{text} returned shape {_shape(out)}; expected (B, 1 + L) = "
                                         f"({batch.size(0)}, 1 + L), one row of token ids per sentence")
                if not bool((out[:, 0] == bos).all()):
                    raise AssertionError(f"{text}: every row must start with the start token bos_id={bos}, "
                                         f"got first column {out[:, 0].tolist()}")

                def wrong(**kw: Any) -> Callable[[], Tensor]:
                    return lambda: _greedy_by_hand(model, batch, max_len, bos, eos, **kw)

                if out.shape != expected.shape or not torch.equal(out, expected):
                    for hint, make in [
                        ("The next token comes from the decoder's output at the LAST position, "
                         "hidden[:, -1], not the first.", wrong(first_position=True)),
                        ("Pass the source padding mask to model.decode as src_mask, so that the cross-attention "
                         "ignores the source's padding.", wrong(pass_src_mask=False)),
                        ("Stop as soon as every sentence has produced eos_id.", wrong(stop=False)),
                        (f"After a sentence's end token, fill its row with the pad id "
                         f"(model.config.pad_id = {model.config.pad_id}).", wrong(pad_after_end=False)),
                    ]:
                        wrong_out = make()
                        if out.shape == wrong_out.shape and torch.equal(out.long(), wrong_out):
                            raise AssertionError(f"{text}: {hint}")
                    raise AssertionError(f"{text}: expected\n{expected.tolist()}\ngot\n{out.tolist()}")
    _passed(task, f"greedy decoding, {n_cases} cases on 3 small models (one sentence and a padded batch each)")


# ----------------------------------------------------------------------------------------------
# Grading whole notebooks
# ----------------------------------------------------------------------------------------------

@dataclass
class TaskResult:
    """The outcome of one graded check cell."""

    grade_id: str
    title: str
    points: float
    passed: bool
    message: str

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0


@dataclass
class Report:
    """The grade of one notebook: one :class:`TaskResult` per check cell, plus notes and errors."""

    path: str
    tasks: list[TaskResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tasks)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tasks)

    def table(self, width: int = 72) -> str:
        """A plain-text table (task, title, points, passed, message), the total, then the full messages
        of the failed tasks whose message did not fit in ``width`` characters."""
        def cut(text: str) -> str:
            line = " ".join(text.split())
            return line if len(line) <= width else line[: width - 1] + "…"

        rows = [(t.grade_id, t.title, f"{_num(t.score)}/{_num(t.points)}", "yes" if t.passed else "no",
                 cut(t.message)) for t in self.tasks]
        head = ("task", "title", "points", "passed", "message")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        lines = [f"{self.path}  ({self.seconds:.1f} s)"]
        for row in [head, *rows]:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
        total = f"{_num(self.score)}/{_num(self.max_score)}"
        lines.append("  " + "total".ljust(widths[0] + widths[1] + 2) + "  " + total)
        for t in self.tasks:
            if not t.passed and len(" ".join(t.message.split())) > width:
                lines.append(textwrap.fill(" ".join(t.message.split()), width=100, initial_indent=f"  {t.grade_id}: ",
                                           subsequent_indent=" " * (len(t.grade_id) + 4), break_on_hyphens=False))
        lines += [f"  note: {n}" for n in self.notes]
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score)
        for task, result in zip(data["tasks"], self.tasks):
            task["score"] = result.score
        return data


def _num(x: float) -> str:
    return f"{x:g}"


def _grading(cell: Any) -> dict[str, Any] | None:
    info = cell.get("metadata", {}).get("grading")
    return info if isinstance(info, dict) and "grade_id" in info else None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _find_reference(nb: Any, path: Path, reference: Path | None) -> Path | None:
    name = nb.get("metadata", {}).get("grading", {}).get("exercise") or path.stem
    folder = reference if reference is not None else COURSE_EXERCISES
    candidate = folder / f"{name}.ipynb"
    return candidate if candidate.is_file() else None


def _identifiers(source: str) -> set[str]:
    """Names, attributes and imported names in a code cell; words in strings and comments do not count."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:  # a learner's broken cell: fall back to every word outside comments
        return set(re.findall(r"\w+", re.sub(r"#.*", "", source)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
    return names


def _package_uses(nb: Any) -> list[str]:
    """Notes for the instructor: code that uses the package's version of what a task asks for.

    Each check cell lists those names in ``metadata["grading"]["avoid"]``.
    """
    used_names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and _grading(cell) is None:
            used_names |= _identifiers(cell.source)
    notes = []
    for cell in nb.cells:
        info = _grading(cell)
        if info is None:
            continue
        used = [name for name in info.get("avoid", []) if name in used_names]
        if used:
            notes.append(f"{info['grade_id']}: the code uses {', '.join(used)}, the package's own version of "
                         "what this task asks for")
    return notes


def _kernel_for(nb: Any) -> str:
    """The notebook's own kernel when it is installed here, else the default ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    wanted = nb.get("metadata", {}).get("kernelspec", {}).get("name", "python3")
    return wanted if wanted in KernelSpecManager().find_kernel_specs() else "python3"


def grade_notebook(path: str | Path, *, timeout: float = 120.0, reference: str | Path | None = None,
                   kernel_name: str | None = None) -> Report:
    """Execute an exercise notebook in a fresh kernel and score its check cells.

    A check cell carries ``metadata["grading"] = {"grade_id": "task-1", "task": 1, "points": 2, "title": ...}``.
    When the original exercise can be found (``reference``, a folder, or the course's ``exercises/``;
    matched by the notebook's ``metadata["grading"]["exercise"]`` or its file name), its check cells
    replace the submission's (edited ones are restored, deleted ones appended) and its points count.
    A task passes when its check cell runs without an error and prints ``✓ Task N passed``. Code
    that names the package's version of a task's piece (the check cell's ``"avoid"`` list) is
    reported in the notes, for the instructor to look at; it costs no points by itself.

    Args:
        path: the notebook to grade; it is not modified.
        timeout: seconds allowed for each cell.
        reference: folder holding the original exercise notebooks.
        kernel_name: Jupyter kernel to run; defaults to the notebook's own.

    Returns:
        A :class:`Report`; a notebook that cannot be read or run gets an ``error`` and 0 points.
    """
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as err:  # pragma: no cover - both come with the dev and notebooks extras
        raise ImportError("grading needs nbformat and nbclient: pip install -e '.[dev]'") from err

    path = Path(path)
    report = Report(path=str(path))
    start = time.perf_counter()
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:
        report.error = f"cannot read the notebook: {type(err).__name__}: {err}"
        return report

    ref_path = _find_reference(nb, path, Path(reference) if reference is not None else None)
    if ref_path is not None:
        ref_nb = nbformat.read(ref_path, as_version=4)
        originals = {info["grade_id"]: c for c in ref_nb.cells if (info := _grading(c))}
        seen = set()
        for cell in nb.cells:
            info = _grading(cell)
            if info is None:
                continue
            original = originals.get(info["grade_id"])
            if original is None:
                cell.metadata.pop("grading")  # not a task of this exercise: runs, but is not graded
                report.notes.append(f"check cell {info['grade_id']!r} is not part of {ref_path.name}; not graded")
                continue
            seen.add(info["grade_id"])
            if cell.source != original.source:
                report.notes.append(f"check cell {info['grade_id']} was edited; the original was restored")
            cell.source, cell.metadata["grading"] = original.source, dict(original.metadata["grading"])
        for grade_id, original in originals.items():
            if grade_id not in seen:
                report.notes.append(f"check cell {grade_id} was missing; the original was added at the end")
                nb.cells.append(copy.deepcopy(original))
    else:
        report.notes.append("original exercise not found: the submission's own check cells were graded")

    checks = [c for c in nb.cells if _grading(c)]
    if not checks:
        report.error = "no check cells (cells with metadata 'grading') found"
        report.seconds = time.perf_counter() - start
        return report
    report.notes += _package_uses(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client_kwargs: dict[str, Any] = dict(timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
                                         shutdown_kernel="immediate",
                                         resources={"metadata": {"path": str(path.resolve().parent)}})
    client_kwargs["kernel_name"] = kernel_name or _kernel_for(nb)
    try:
        NotebookClient(nb, **client_kwargs).execute()
    except Exception as err:  # the kernel died or could not start: the cells not run score 0
        report.error = f"execution stopped: {type(err).__name__}: {_ANSI.sub('', str(err)).strip()[:300]}"

    for cell in checks:
        info = _grading(cell)
        assert info is not None
        task = info.get("task", info["grade_id"].removeprefix("task-"))
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        if errors and errors[0].get("ename") == "KeyboardInterrupt":
            message, passed = f"timed out: the cell ran for more than {timeout:g} s and was interrupted", False
        elif errors:
            message = _ANSI.sub("", f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}")
            passed = False
        elif cell.get("execution_count") is None:
            message, passed = "not run" + (f" ({report.error})" if report.error else ""), False
        elif f"✓ Task {task} passed" in text:
            message, passed = next((ln for ln in text.splitlines() if ln.startswith("✓")), ""), True
        else:
            message, passed = "the check did not report success", False
        report.tasks.append(TaskResult(grade_id=info["grade_id"], title=str(info.get("title", "")),
                                       points=float(info.get("points", 1)), passed=passed, message=message))
    report.seconds = time.perf_counter() - start
    return report


def _notebooks(paths: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        elif p.is_file():
            found.append(p)
        else:
            raise FileNotFoundError(f"no such notebook or folder: {p}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m minitransformer.grading NOTEBOOK_OR_FOLDER ... [--json out.json]``: grade and print tables."""
    parser = argparse.ArgumentParser(
        prog="python -m minitransformer.grading",
        description="Run exercise notebooks in fresh kernels and score their check cells.",
    )
    parser.add_argument("paths", nargs="+", help="submitted notebooks, or folders searched for *.ipynb")
    parser.add_argument("--json", type=Path, help="also write every report to this JSON file")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per cell (default 120)")
    parser.add_argument("--reference", type=Path, default=None,
                        help=f"folder with the original exercises (default {COURSE_EXERCISES})")
    parser.add_argument("--kernel", default=None, help="Jupyter kernel name (default: the notebook's own)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at the same time (default 1)")
    args = parser.parse_args(argv)
    try:
        files = _notebooks(args.paths)
    except FileNotFoundError as err:
        parser.error(str(err))
    if not files:
        parser.error("no notebooks found")
    grade = functools.partial(grade_notebook, timeout=args.timeout, reference=args.reference,
                              kernel_name=args.kernel)
    reports = []
    if args.jobs > 1 and len(files) > 1:
        # Separate processes, each starting its own kernels; results are printed in the given order.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(min(args.jobs, len(files)), mp_context=context) as pool:
            for report in pool.map(grade, files):
                reports.append(report)
                print(report.table(), end="\n\n", flush=True)
    else:
        for path in files:
            reports.append(grade(path))
            print(reports[-1].table(), end="\n\n", flush=True)
    if len(reports) > 1:
        width = max(len(r.path) for r in reports)
        print("submission".ljust(width) + "  score")
        for r in reports:
            print(r.path.ljust(width) + f"  {_num(r.score)}/{_num(r.max_score)}" + ("  (error)" if r.error else ""))
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
