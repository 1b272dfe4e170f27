"""Lesson 02: the sinusoidal table for any width, base and length, and offsets as rotations.

:func:`positional_table` draws the table (section 3.5); :func:`offset_rotation` the rotation M_k with
PE(pos) M_k = PE(pos + k), so that PE(pos) . PE(pos + k) depends on k alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor

from ..embeddings import PositionalEncoding, sinusoidal_positional_encoding
from ..utils import check_even, check_int, check_number
from .controls import check_figure, figure_size

__all__ = ["OffsetRotation", "PositionalTable", "draw_offset_rotation", "draw_positional_table", "offset_rotation",
           "positional_table"]


@dataclass(frozen=True)
class PositionalTable:
    """What :func:`positional_table` computed."""

    table: Tensor
    pair: int
    frequency: float
    wavelength: float


def positional_table(max_len: int = 100, d_model: int = 64, base: float = 10000.0, pair: int = 0) -> PositionalTable:
    """The sinusoidal table of :class:`PositionalEncoding` and one of its (sin, cos) column pairs.

    Shape:
        ``table`` is (max_len, d_model).
    """
    check_int(max_len, "max_len", 1, at_most=100_000)
    check_even(d_model, "d_model")
    check_number(base, "base", low=1.0, low_open=True, why=" (the paper uses 10000)")
    check_int(pair, "pair", 0, below=d_model // 2, why=f" (a (sin, cos) column pair of d_model={d_model})")
    table = PositionalEncoding(d_model, max_len, dropout=0.0, base=base).pe  # (max_len, D)
    frequency = base ** (-2 * pair / d_model)
    return PositionalTable(table, pair, frequency, 2 * math.pi / frequency)


@figure_size(10.0, 3.6)
def draw_positional_table(fig: Figure | SubFigure, max_len: int = 100, d_model: int = 64, base: float = 10000.0,
                          pair: int = 0) -> PositionalTable:
    """Heat map of the table (with its colour bar) and the chosen pair's two curves: 3 axes."""
    check_figure(fig, "draw_positional_table")
    view = positional_table(max_len, d_model, base, pair)
    heat_ax, line_ax = fig.subplots(1, 2)
    image = heat_ax.imshow(view.table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                           interpolation="nearest")
    for column in (2 * pair, 2 * pair + 1):
        heat_ax.axvline(column, color="black", lw=0.8, alpha=0.6)
    heat_ax.set_xlabel("dimension")
    heat_ax.set_ylabel("position")
    heat_ax.set_title(f"PE, {max_len} positions x {d_model} dims, base {base:g}", fontsize=10)
    fig.colorbar(image, ax=heat_ax, fraction=0.05)
    positions = torch.arange(max_len)
    line_ax.plot(positions, view.table[:, 2 * pair], ".-", ms=3, lw=1, label=f"sin, dim {2 * pair}")
    line_ax.plot(positions, view.table[:, 2 * pair + 1], ".-", ms=3, lw=1, label=f"cos, dim {2 * pair + 1}")
    line_ax.set_ylim(-1.15, 1.4)
    line_ax.set_xlabel("position")
    line_ax.legend(fontsize=8, ncols=2, loc="upper right")
    line_ax.set_title(f"pair {pair}: w = {view.frequency:.3g} rad/position, wavelength {view.wavelength:.3g}",
                      fontsize=10)
    return view


@dataclass(frozen=True)
class OffsetRotation:
    """What :func:`offset_rotation` computed."""

    rotation: Tensor
    error: float
    dots: Tensor
    along_offset: Tensor
    expected: float
    offset: int


def offset_rotation(offset: int = 5, d_model: int = 64, max_len: int = 60, base: float = 10000.0) -> OffsetRotation:
    """The rotation M_k that moves every position k steps on, and the dot products it implies.

    Shape:
        ``rotation`` (D, D), ``dots`` (max_len, max_len), ``along_offset`` (max_len - k,).
    """
    check_even(d_model, "d_model")
    check_int(max_len, "max_len", 1, at_most=5_000)
    check_int(offset, "offset", 0, below=max_len,
              why=f" (an offset between two of the max_len={max_len} positions)")
    check_number(base, "base", low=1.0, low_open=True, why=" (the paper uses 10000)")
    # float64 throughout, so that the check below shows the identity and not float32 rounding.
    table = sinusoidal_positional_encoding(max_len, d_model, base).double()  # (max_len, D), rounded to float32
    angles = offset * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    cos, sin = torch.cos(angles), torch.sin(angles)
    rotation = torch.zeros(d_model, d_model, dtype=torch.float64)  # (D, D)
    # Row vector times M: [sin a, cos a] M = [sin(a + b), cos(a + b)] with M = [[cos b, -sin b], [sin b, cos b]].
    rotation[0::2, 0::2] = torch.diag(cos)
    rotation[0::2, 1::2] = torch.diag(-sin)
    rotation[1::2, 0::2] = torch.diag(sin)
    rotation[1::2, 1::2] = torch.diag(cos)
    moved = table[: max_len - offset] @ rotation  # (max_len - k, D)
    error = (moved - table[offset:]).abs().max().item()
    dots = table @ table.T  # (max_len, max_len)
    along = torch.diagonal(dots, offset)  # (max_len - k,)
    return OffsetRotation(rotation, error, dots, along, float(cos.sum()), offset)


@figure_size(11.0, 3.5)
def draw_offset_rotation(fig: Figure | SubFigure, offset: int = 5, d_model: int = 64, max_len: int = 60,
                         base: float = 10000.0, shown_dims: int = 16) -> OffsetRotation:
    """The rotation M_k (first ``shown_dims`` dimensions), the dot-product matrix, and its k-th diagonal: 3 axes."""
    check_figure(fig, "draw_offset_rotation")
    view = offset_rotation(offset, d_model, max_len, base)
    shown = min(check_int(shown_dims, "shown_dims", 2), d_model)
    rot_ax, dot_ax, line_ax = fig.subplots(1, 3)
    rot_ax.imshow(view.rotation[:shown, :shown].numpy(), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    rot_ax.set_title(f"M_k for k = {offset} (first {shown} dims)\nmax |PE(p) M_k - PE(p+k)| = {view.error:.1e}",
                     fontsize=10)
    rot_ax.set_xlabel("output dimension")
    rot_ax.set_ylabel("input dimension")
    dot_ax.imshow(view.dots.numpy(), cmap="viridis", interpolation="nearest")
    span = torch.arange(max_len - offset)
    dot_ax.plot(span + offset, span, color="white", lw=1, ls="--")
    dot_ax.set_title(r"$PE(p) \cdot PE(p')$; dashed: $p' = p + k$", fontsize=10)
    dot_ax.set_xlabel("position p'")
    dot_ax.set_ylabel("position p")
    line_ax.plot(span, view.along_offset.numpy(), "o", ms=3, label=r"$PE(p) \cdot PE(p + k)$")
    line_ax.axhline(view.expected, color="C1", lw=1, label=r"$\sum_i \cos(k\,\omega_i)$")
    line_ax.set_ylim(-0.55 * d_model, 0.55 * d_model)  # the dot product lies in [-D/2, D/2]
    line_ax.set_xlabel("position p")
    line_ax.set_title("the same for every p: it depends on k only", fontsize=10)
    line_ax.legend(fontsize=8, loc="lower right")
    return view
