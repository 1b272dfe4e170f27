"""Checks for the offset rotation of the sinusoidal positional encoding (lesson 02)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..embeddings import sinusoidal_positional_encoding
from ._common import _call, _compare, _expect_shape, _expect_tensor, _isolated, _name, _passed

__all__ = ["check_offset_rotation"]


def _rotation(k: int, d_model: int, *, transpose_blocks: bool = False, pair_exponent: bool = True,
              swap_cos_sin: bool = False) -> Tensor:
    """The block-diagonal M_k with PE[p + k] = PE[p] @ M_k, or a usual wrong version of it."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    omega = 10000.0 ** (-(2 * i if pair_exponent else i) / d_model)  # (D/2,)
    angle = k * omega
    cos, sin = torch.cos(angle), torch.sin(angle)
    if swap_cos_sin:
        cos, sin = sin, cos
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2] = torch.diag(cos)
    m[1::2, 1::2] = torch.diag(cos)
    m[0::2, 1::2] = torch.diag(sin if transpose_blocks else -sin)
    m[1::2, 0::2] = torch.diag(-sin if transpose_blocks else sin)
    return m


@_isolated
def check_offset_rotation(fn: Callable[[int, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(k, d_model) -> M_k`` (D, D): the rotation that moves every position k places (lesson 02).

    With the table PE of :func:`sinusoidal_positional_encoding` (rows are positions),
    ``PE[p + k] = PE[p] @ M_k`` for every p; M_k is block-diagonal with one 2x2 block
    [[cos(w_i k), -sin(w_i k)], [sin(w_i k), cos(w_i k)]] per pair of columns (2i, 2i + 1),
    w_i = 10000^(-2i / d_model). ``k`` may be 0 or negative.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    length = 120
    for k, d_model in ((1, 4), (5, 16), (37, 64), (0, 8), (-3, 8)):
        text = f"{_name(fn)}({k}, {d_model})"
        m = _expect_tensor(_call(fn, k, d_model, text=text), text, f"of shape ({d_model}, {d_model})")
        _expect_shape(m, (d_model, d_model), text, "matrix", {
            (d_model // 2, 2, 2): "Put the 2x2 blocks on the diagonal of one (D, D) matrix "
                                  "(torch.block_diag(*blocks)).",
        })
        if not m.is_floating_point():
            raise AssertionError(f"{text} returned a {m.dtype} matrix; expected floating-point numbers")
        expected = _rotation(k, d_model)
        pe = sinusoidal_positional_encoding(length, d_model).double()
        start, stop = max(0, -k), length - max(0, k)
        moved = pe[start:stop] @ m.double()
        mistakes = [
            ("Your matrix moves the positions backwards, PE[p - k]: with row vectors, PE[p] @ M_k, each block is "
             "[[cos, -sin], [sin, cos]]; you built its transpose.",
             lambda: _rotation(k, d_model, transpose_blocks=True)),
            ("The frequency of pair i is w_i = 10000^(-2i / d_model): the exponent needs the factor 2.",
             lambda: _rotation(k, d_model, pair_exponent=False)),
            ("The diagonal of each block holds cos(w_i k) and the off-diagonal sin(w_i k), not the other way round.",
             lambda: _rotation(k, d_model, swap_cos_sin=True)),
        ]
        _compare(m.double(), expected, text, "matrix", mistakes, atol=1e-5, rtol=1e-4)
        if not torch.allclose(moved, pe[start + k:stop + k], atol=1e-4):  # float32 table: rounding only
            raise AssertionError(f"{text}: PE[p] @ M_k differs from PE[p + k]")
    _passed(task, "offset rotation M_k, 5 cases (k = 1, 5, 37, 0 and -3; PE[p] @ M_k = PE[p + k] for every p)")
