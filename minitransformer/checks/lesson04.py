"""Checks for exercise 04: splitting d_model into heads and back, multi-head attention (lesson 04)."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..attention import MultiHeadAttention
from ..masks import make_causal_mask
from .operations import LINEAR, SOFTMAX
from .compare import (build_learner, call_learner, call_text, compare, copy_linear, expect_shape, expect_tensor,
                      fill_parameters, first_output, isolated, linear_like, callable_name, report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_multi_head_attention", "check_split_and_merge_heads"]


@isolated(builds='splitting and merging heads from view (or reshape) and transpose', allow=())
def check_split_and_merge_heads(split: Callable[[Tensor, int], Tensor], merge: Callable[[Tensor], Tensor], *,
                                task: int | str | None = None) -> None:
    """Check ``split(x, n_heads)`` (B, T, D) -> (B, H, T, Dk) and ``merge(heads)`` (B, H, T, Dk) -> (B, T, D).

    Head i takes the block of features i*Dk ... (i+1)*Dk - 1 of every position, as
    :meth:`MultiHeadAttention.split_heads` does; ``merge`` is its inverse (the concatenation of
    the heads, lesson 04).

    Args:
        split: the learner's split function.
        merge: the learner's merge function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    for batch, length, d_model, n_heads in ((2, 3, 8, 2), (1, 5, 12, 3), (2, 4, 6, 1), (3, 2, 4, 4)):
        d_k = d_model // n_heads
        x = random_tensor(g, batch, length, d_model)
        text = f"{callable_name(split)}(x {shape_text(x)}, n_heads={n_heads})"
        heads = expect_tensor(call_learner(split, x, n_heads, text=text), text,
                               f"of shape {shape_text((batch, n_heads, length, d_k))}")
        expected = x.view(batch, length, n_heads, d_k).transpose(1, 2)  # (B, H, T, Dk)
        expect_shape(heads, expected.shape, text, "heads", {
            (batch, length, n_heads, d_k): "Also move the heads in front of the positions: .transpose(1, 2).",
            (batch, n_heads * length, d_k): "Keep separate axes for the heads and the positions: (B, H, T, Dk).",
        })
        compare(heads, expected, text, "heads", [
            ("View x as (B, T, H, Dk) and then transpose to (B, H, T, Dk); a direct view or reshape to "
             "(B, H, T, Dk) cuts the sequence at the wrong places and mixes the positions.",
             lambda: x.reshape(batch, n_heads, length, d_k)),
            ("Head i takes the contiguous block of features i*d_k ... (i+1)*d_k - 1: view as (B, T, H, Dk), "
             "not (B, T, Dk, H).", lambda: x.view(batch, length, d_k, n_heads).permute(0, 3, 1, 2)),
        ])
        y = random_tensor(g, batch, n_heads, length, d_k)
        text = f"{callable_name(merge)}(heads {shape_text(y)})"
        try:
            merged = call_learner(merge, y, text=text)
        except AssertionError as err:
            if "view size is not compatible" in str(err):
                raise AssertionError(f"{err}. After a transpose the numbers are no longer stored in row order: use "
                                     ".reshape(...) (or .contiguous().view(...)) instead of .view(...).") from None
            raise
        merged = expect_tensor(merged, text, f"of shape {shape_text((batch, length, d_model))}")
        expected = y.transpose(1, 2).reshape(batch, length, d_model)  # (B, T, D)
        expect_shape(merged, expected.shape, text, "merged tensor", {
            (batch, length, n_heads, d_k): "Glue the heads of each position together: reshape to (B, T, H * Dk).",
        })
        compare(merged, expected, text, "merged tensor", [
            ("Transpose (B, H, T, Dk) back to (B, T, H, Dk) before reshaping to (B, T, D); reshaping directly "
             "mixes the positions.", lambda: y.reshape(batch, length, d_model)),
            ("Put the heads side by side, head 0 in features 0 ... d_k - 1: transpose to (B, T, H, Dk), not "
             "(B, T, Dk, H).", lambda: y.permute(0, 2, 3, 1).reshape(batch, length, d_model)),
        ])
        back = call_learner(merge, call_learner(split, x, n_heads, text=text), text=f"{callable_name(merge)}({callable_name(split)}(x))")
        if not torch.equal(back, x):
            raise AssertionError(f"{callable_name(merge)}({callable_name(split)}(x, {n_heads})) does not give x back: merge must "
                                 "undo split")
    report_passed(task, "split and merge heads, 4 sizes (1 to 4 heads, d_k from 1 to 4), merge undoes split")


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


def _mha_cases(g: torch.Generator) -> list[tuple[str, int, int, Tensor, Tensor, Tensor | None]]:
    keep = torch.tensor([[True, True, True, True, False], [True, True, False, False, False]])
    return [
        ("self-attention, d_model=8, n_heads=2", 8, 2, random_tensor(g, 2, 3, 8), random_tensor(g, 2, 3, 8), None),
        ("cross-attention with a padding mask, d_model=12, n_heads=3", 12, 3, random_tensor(g, 2, 2, 12), random_tensor(g, 2, 5, 12),
         keep[:, None, None, :]),
        ("self-attention with a causal mask, d_model=8, n_heads=2", 8, 2, random_tensor(g, 2, 4, 8), random_tensor(g, 2, 4, 8),
         make_causal_mask(4)),
        ("one head, d_model=8, n_heads=1", 8, 1, random_tensor(g, 1, 3, 8), random_tensor(g, 1, 3, 8), None),
        ("d_k = 1, d_model=4, n_heads=4", 4, 4, random_tensor(g, 2, 3, 4), random_tensor(g, 2, 2, 4), None),
    ]


@isolated(avoid=("minitransformer.attention:MultiHeadAttention", "torch.nn:MultiheadAttention"),
          builds='multi-head attention from linear layers, matrix products and a softmax',
          allow=(*LINEAR, *SOFTMAX, 'dropout'))
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
    g = make_rng()
    for case, d_model, n_heads, query, memory, mask in _mha_cases(g):
        mine = build_learner(cls, d_model, n_heads)
        owner = f"{callable_name(cls)}({d_model}, {n_heads})"
        ref = MultiHeadAttention(d_model, n_heads).eval()
        fill_parameters(ref, g)
        for name in ("w_q", "w_k", "w_v", "w_o"):
            copy_linear(linear_like(mine, name, d_model, d_model, owner), getattr(ref, name))
        key = value = memory
        args = (query, key, value) if mask is None else (query, key, value, mask)
        text = call_text(mine, *args, names=("query", "key", "value", "mask")).replace(
            callable_name(mine), f"{owner}.forward", 1) + f" [{case}]"
        out = expect_tensor(first_output(call_learner(mine, *args, text=text)), text, "as the output")
        expected = ref(query, key, value, mask)[0]
        expect_shape(out, expected.shape, text, "output")
        compare(out, expected, text, "output", _mha_mistakes(ref, query, key, value, mask))
    report_passed(task, "multi-head attention, 5 cases (self- and cross-attention, padding and causal masks, "
                  "1 to 4 heads, d_k from 1 to 8)")
