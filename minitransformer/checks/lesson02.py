"""Checks for exercise 02: the sinusoidal positional encoding and its offset rotation (lesson 02)."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from ..embeddings import sinusoidal_positional_encoding
from .compare import call_learner, compare, expect_shape, expect_tensor, isolated, callable_name, report_passed

__all__ = ["check_offset_rotation", "check_positional_encoding"]


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


@isolated(builds='the rotation from sines and cosines', allow=('block_diag',))
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
        text = f"{callable_name(fn)}({k}, {d_model})"
        m = expect_tensor(call_learner(fn, k, d_model, text=text), text, f"of shape ({d_model}, {d_model})")
        expect_shape(m, (d_model, d_model), text, "matrix", {
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
        compare(m.double(), expected, text, "matrix", mistakes, atol=1e-5, rtol=1e-4)
        if not torch.allclose(moved, pe[start + k:stop + k], atol=1e-4):  # float32 table: rounding only
            raise AssertionError(f"{text}: PE[p] @ M_k differs from PE[p + k]")
    report_passed(task, "offset rotation M_k, 5 cases (k = 1, 5, 37, 0 and -3; PE[p] @ M_k = PE[p + k] for every p)")


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


@isolated(avoid=("minitransformer.embeddings:sinusoidal_positional_encoding", "minitransformer.embeddings:PositionalEncoding"),
          builds='the sinusoidal encoding from sin, cos and arange', allow=())
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
        text = f"{callable_name(fn)}({max_len}, {d_model})"
        pe = expect_tensor(call_learner(fn, max_len, d_model, text=text), text, f"of shape ({max_len}, {d_model})")
        expect_shape(pe, (max_len, d_model), text, "table", {
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

        compare(pe, expected, text, "table", mistakes, atol=1e-4, rtol=1e-4, fallback=row_zero)
    report_passed(task, f"sinusoidal positional encoding, {len(sizes)} table sizes: " + ", ".join(map(str, sizes)))
