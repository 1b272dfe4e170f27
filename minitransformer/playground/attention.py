"""Lesson 03: why the scores are divided by sqrt(d_k), and what a mask does to the weights.

Scores of unit-variance queries and keys have variance d_k: unscaled, the softmax turns one-hot as d_k grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor

from ..attention import scaled_dot_product_attention
from ..embeddings import sinusoidal_positional_encoding
from ..masks import make_causal_mask, make_padding_mask
from ..utils import check_int
from .controls import check_figure, figure_size, options_from

__all__ = ["D_K_VALUES", "MaskedAttention", "SoftmaxSaturation", "draw_masked_attention", "draw_softmax_saturation",
           "masked_attention", "softmax_saturation"]

#: The widths swept by :func:`draw_softmax_saturation` (and good slider stops).
D_K_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class SoftmaxSaturation:
    """What :func:`softmax_saturation` computed."""

    weights: Tensor
    max_weight: float
    entropy: float
    d_k: int
    scaled: bool


def softmax_saturation(d_k: int = 64, scaled: bool = True, n_keys: int = 10, n_queries: int = 500,
                       seed: int = 0) -> SoftmaxSaturation:
    """Attention weights of random queries over random keys, with or without the 1/sqrt(d_k).

    Queries and keys have independent N(0, 1) entries, as the paper's footnote 4 assumes; the
    same ``seed`` gives the same draws for both settings of ``scaled``.

    Shape:
        ``weights`` is (n_queries, n_keys).
    """
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be True or False, got {scaled!r}")
    return _both_ways(d_k, n_keys, n_queries, seed)[scaled]


def _both_ways(d_k: int, n_keys: int, n_queries: int, seed: int) -> dict[bool, SoftmaxSaturation]:
    """:func:`softmax_saturation` scaled and unscaled, from one draw of queries and keys."""
    check_int(d_k, "d_k", 1, at_most=65_536)
    check_int(n_keys, "n_keys", 2, at_most=10_000)
    check_int(n_queries, "n_queries", 1, at_most=100_000)
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(n_queries, 1, d_k, generator=generator)  # (N, 1, d_k)
    key = torch.randn(n_queries, n_keys, d_k, generator=generator)  # (N, n_keys, d_k)
    value = torch.zeros(n_queries, n_keys, 1)  # (N, n_keys, 1): only the weights are looked at
    found = {}
    for scaled in (False, True):
        _, weights = scaled_dot_product_attention(query, key, value, scale=None if scaled else 1.0)  # (N, 1, n_keys)
        weights = weights[:, 0]  # (N, n_keys)
        entropy = -(weights * weights.clamp_min(1e-30).log()).sum(dim=-1)  # (N,)
        found[scaled] = SoftmaxSaturation(weights, weights.max(dim=-1).values.mean().item(), entropy.mean().item(),
                                          d_k, scaled)
    return found


@figure_size(12.0, 3.5)
def draw_softmax_saturation(fig: Figure | SubFigure, d_k: int = 64, scaled: bool = True, n_keys: int = 10,
                            seed: int = 0, shown_rows: int = 5) -> SoftmaxSaturation:
    """A few softmax rows at this d_k, and the mean largest weight and entropy against d_k: 3 axes.

    The two curves (scaled and unscaled) are swept over :data:`D_K_VALUES` with the same seed;
    the point of the chosen setting is ringed.
    """
    check_figure(fig, "draw_softmax_saturation")
    view = softmax_saturation(d_k, scaled, n_keys, seed=seed)
    rows = min(check_int(shown_rows, "shown_rows", 1), view.weights.size(0))
    widths = sorted(set(D_K_VALUES) | {d_k})
    both = [_both_ways(w, n_keys, view.weights.size(0), seed) for w in widths]
    sweep = {s: [pair[s] for pair in both] for s in (False, True)}
    row_ax, max_ax, ent_ax = fig.subplots(1, 3)
    ranked = view.weights[:rows].sort(dim=-1, descending=True).values  # (rows, n_keys)
    for r in range(rows):
        row_ax.plot(range(1, n_keys + 1), ranked[r].numpy(), "o-", ms=3, lw=1)
    row_ax.axhline(1 / n_keys, color="gray", ls=":", lw=1)
    row_ax.set_ylim(0, 1.02)
    row_ax.set_xlabel("key, by rank")
    row_ax.set_ylabel("attention weight")
    name = r"$q \cdot k / \sqrt{d_k}$" if scaled else r"$q \cdot k$"
    row_ax.set_title(f"softmax({name}), d_k = {d_k}: {rows} queries", fontsize=10)
    labels = {False: r"unscaled $q \cdot k$", True: r"scaled $q \cdot k / \sqrt{d_k}$"}
    for ax, metric, ylabel in ((max_ax, "max_weight", "largest weight of a row"),
                               (ent_ax, "entropy", "entropy of a row (nats)")):
        for s, marker in ((False, "o-"), (True, "s-")):
            ax.semilogx(widths, [getattr(v, metric) for v in sweep[s]], marker, ms=3, lw=1, label=labels[s],
                        base=2)
        ax.plot([d_k], [getattr(view, metric)], "o", ms=11, mfc="none", mec="black", mew=1.5)
        ax.set_xlabel(r"$d_k$")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    ent_ax.axhline(math.log(n_keys), color="gray", ls=":", lw=1, label=f"uniform: ln {n_keys}")
    max_ax.set_ylim(0, 1.02)
    ent_ax.set_ylim(0, 1.05 * math.log(n_keys))
    ent_ax.legend(fontsize=8, loc="lower left")
    return view


@dataclass(frozen=True)
class MaskedAttention:
    """What :func:`masked_attention` computed."""

    tokens: list[str]
    mask: Tensor
    weights: Tensor


def masked_attention(padded: Sequence[int] = (), causal: bool = False, sentence: str = "the cat sat on the mat",
                     d_model: int = 16, seed: int = 0) -> MaskedAttention:
    """Self-attention weights of a toy sentence under a padding mask and/or the causal mask.

    Each distinct word gets a random vector (seeded), plus its positional encoding; queries and
    keys are random projections of these. A position listed in ``padded`` holds ``<pad>``:
    its key is hidden from every query by :func:`make_padding_mask`; ``causal`` adds
    :func:`make_causal_mask`, which hides every key after the query.

    Shape:
        ``mask`` and ``weights`` are (T, T), T = number of words.
    """
    if not isinstance(sentence, str) or not sentence.split():
        raise ValueError(f"sentence must be some words separated by spaces, got {sentence!r}")
    words = sentence.split()
    length = len(words)
    if length > 24:
        raise ValueError(f"sentence has {length} words: expected at most 24, to keep the map readable")
    check_int(d_model, "d_model", 2)
    if d_model % 2:
        raise ValueError(f"d_model must be even (the positional encoding pairs columns), got {d_model}")
    if isinstance(padded, (str, bytes)) or not isinstance(padded, Sequence):
        raise TypeError(f"padded must be a list of positions, got {type(padded).__name__} {padded!r}")
    for p in padded:
        check_int(p, "each padded position", 0, below=length, why=f" (the sentence has {length} words)")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    tokens = ["<pad>" if i in set(padded) else w for i, w in enumerate(words)]
    # Ids from the whole sentence, so that a word keeps its vector whichever positions are padding.
    vocab = {w: i for i, w in enumerate(dict.fromkeys(["<pad>", *words]))}  # "<pad>" is id 0
    ids = torch.tensor([[vocab[w] for w in tokens]])  # (1, T)
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(len(vocab), d_model, generator=generator)  # (V, D)
    w_q, w_k = (torch.randn(d_model, d_model, generator=generator) / math.sqrt(d_model) for _ in range(2))
    x = table[ids] + sinusoidal_positional_encoding(length, d_model)  # (1, T, D)
    mask = make_padding_mask(ids, vocab["<pad>"])  # (1, 1, 1, T)
    if causal:
        mask = mask & make_causal_mask(length)  # (1, 1, T, T)
    mask = mask.expand(1, 1, length, length)  # (1, 1, T, T)
    q, k = (x @ w_q)[:, None], (x @ w_k)[:, None]  # (1, 1, T, D) each
    _, weights = scaled_dot_product_attention(q, k, k, mask)  # (1, 1, T, T)
    return MaskedAttention(tokens, mask[0, 0], weights[0, 0])


@figure_size(9.5, 4.0)
@options_from(padded=lambda sentence, **_: range(len(sentence.split())))  # live(): one position per word
def draw_masked_attention(fig: Figure | SubFigure, padded: Sequence[int] = (), causal: bool = False,
                          sentence: str = "the cat sat on the mat", d_model: int = 16,
                          seed: int = 0) -> MaskedAttention:
    """The mask (may attend: yellow) and the weights written in their cells: 2 axes."""
    check_figure(fig, "draw_masked_attention")
    view = masked_attention(padded, causal, sentence, d_model, seed)
    mask_ax, weight_ax = fig.subplots(1, 2)
    length = len(view.tokens)
    for ax, matrix, title in ((mask_ax, view.mask.float(), "mask: True = may attend"),
                              (weight_ax, view.weights, "attention weights (rows sum to 1)")):
        ax.imshow(matrix.numpy(), cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks(range(length), view.tokens, rotation=60, ha="right")
        ax.set_yticks(range(length), view.tokens)
        ax.set_xlabel("key (attended to)")
        ax.set_title(title, fontsize=10)
    mask_ax.set_ylabel("query (attending)")
    if length <= 12:
        for i in range(length):
            for j in range(length):
                value = float(view.weights[i, j])
                weight_ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                               color="white" if value < 0.6 else "black")
    return view
