"""Checks for splitting d_model into heads and merging them back (lesson 04)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ._common import _call, _compare, _expect_shape, _expect_tensor, _isolated, _name, _passed, _rand, _rng, _shape

__all__ = ["check_split_and_merge_heads"]


@_isolated
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
    g = _rng()
    for batch, length, d_model, n_heads in ((2, 3, 8, 2), (1, 5, 12, 3), (2, 4, 6, 1), (3, 2, 4, 4)):
        d_k = d_model // n_heads
        x = _rand(g, batch, length, d_model)
        text = f"{_name(split)}(x {_shape(x)}, n_heads={n_heads})"
        heads = _expect_tensor(_call(split, x, n_heads, text=text), text,
                               f"of shape {_shape((batch, n_heads, length, d_k))}")
        expected = x.view(batch, length, n_heads, d_k).transpose(1, 2)  # (B, H, T, Dk)
        _expect_shape(heads, expected.shape, text, "heads", {
            (batch, length, n_heads, d_k): "Also move the heads in front of the positions: .transpose(1, 2).",
            (batch, n_heads * length, d_k): "Keep separate axes for the heads and the positions: (B, H, T, Dk).",
        })
        _compare(heads, expected, text, "heads", [
            ("View x as (B, T, H, Dk) and then transpose to (B, H, T, Dk); a direct view or reshape to "
             "(B, H, T, Dk) cuts the sequence at the wrong places and mixes the positions.",
             lambda: x.reshape(batch, n_heads, length, d_k)),
            ("Head i takes the contiguous block of features i*d_k ... (i+1)*d_k - 1: view as (B, T, H, Dk), "
             "not (B, T, Dk, H).", lambda: x.view(batch, length, d_k, n_heads).permute(0, 3, 1, 2)),
        ])
        y = _rand(g, batch, n_heads, length, d_k)
        text = f"{_name(merge)}(heads {_shape(y)})"
        try:
            merged = _call(merge, y, text=text)
        except AssertionError as err:
            if "view size is not compatible" in str(err):
                raise AssertionError(f"{err}. After a transpose the numbers are no longer stored in row order: use "
                                     ".reshape(...) (or .contiguous().view(...)) instead of .view(...).") from None
            raise
        merged = _expect_tensor(merged, text, f"of shape {_shape((batch, length, d_model))}")
        expected = y.transpose(1, 2).reshape(batch, length, d_model)  # (B, T, D)
        _expect_shape(merged, expected.shape, text, "merged tensor", {
            (batch, length, n_heads, d_k): "Glue the heads of each position together: reshape to (B, T, H * Dk).",
        })
        _compare(merged, expected, text, "merged tensor", [
            ("Transpose (B, H, T, Dk) back to (B, T, H, Dk) before reshaping to (B, T, D); reshaping directly "
             "mixes the positions.", lambda: y.reshape(batch, length, d_model)),
            ("Put the heads side by side, head 0 in features 0 ... d_k - 1: transpose to (B, T, H, Dk), not "
             "(B, T, Dk, H).", lambda: y.permute(0, 2, 3, 1).reshape(batch, length, d_model)),
        ])
        back = _call(merge, _call(split, x, n_heads, text=text), text=f"{_name(merge)}({_name(split)}(x))")
        if not torch.equal(back, x):
            raise AssertionError(f"{_name(merge)}({_name(split)}(x, {n_heads})) does not give x back: merge must "
                                 "undo split")
    _passed(task, "split and merge heads, 4 sizes (1 to 4 heads, d_k from 1 to 4), merge undoes split")
