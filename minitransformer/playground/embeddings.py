"""Lesson 01: how large a token's vector is next to its position's, with and without x sqrt(d_model) (section 3.4).

Without the factor, an N(0, 1/d_model) token vector is sqrt(2/d_model) times the size of the position vector
it is added to, and the sum says mostly where a token is, not which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor, nn

from ..embeddings import TokenEmbedding, sinusoidal_positional_encoding
from ..utils import check_even, check_int
from .controls import check_figure, figure_size

__all__ = ["EMBEDDING_INITS", "EmbeddingScale", "draw_embedding_scale", "embedding_scale"]

#: How the embedding table starts: the package's default (the paper's reference code), Xavier, PyTorch's N(0, 1).
EMBEDDING_INITS = ("normal", "xavier", "pytorch")


@dataclass(frozen=True)
class EmbeddingScale:
    """What :func:`embedding_scale` measured."""

    tokens: Tensor
    positions: Tensor
    token_rms: float
    position_rms: float
    ratio: float
    token_cosine: float
    d_model: int
    scaled: bool
    init: str


def embedding_scale(d_model: int = 512, scaled: bool = True, init: str = "normal", vocab_size: int = 1000,
                    length: int = 200, seed: int = 0) -> EmbeddingScale:
    """Token part and position part of the model's input for ``length`` random tokens (lesson 01).

    Shape:
        ``tokens`` and ``positions`` are (T, D).
    """
    check_even(d_model, "d_model")
    check_int(vocab_size, "vocab_size", 1)
    check_int(length, "length", 1, at_most=10_000)
    if init not in EMBEDDING_INITS:
        raise ValueError(f"init must be one of {EMBEDDING_INITS}, got {init!r}")
    if not isinstance(scaled, bool):
        raise TypeError(f"scaled must be True or False, got {scaled!r}")
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():  # building the table draws from the global generator: leave it as it was
        torch.manual_seed(seed)
        embed = TokenEmbedding(vocab_size, d_model)
    with torch.no_grad():
        weight = embed.embedding.weight
        if init == "normal":
            weight.normal_(0.0, d_model ** -0.5, generator=generator)
        elif init == "xavier":
            bound = math.sqrt(6.0 / (vocab_size + d_model))  # xavier_uniform_ of a (V, D) matrix
            weight.uniform_(-bound, bound, generator=generator)
        ids = torch.randint(vocab_size, (1, length), generator=generator)  # (1, T)
        tokens = (embed(ids) if scaled else embed.embedding(ids))[0]  # (T, D)
    positions = sinusoidal_positional_encoding(length, d_model)  # (T, D)
    token_rms = tokens.pow(2).mean().sqrt().item()
    position_rms = positions.pow(2).mean().sqrt().item()
    total = tokens + positions  # (T, D)
    cosine = nn.functional.cosine_similarity(total, tokens, dim=-1).mean().item()
    return EmbeddingScale(tokens, positions, token_rms, position_rms, token_rms / position_rms, cosine,
                          d_model, scaled, init)


@figure_size(9.0, 3.4)
def draw_embedding_scale(fig: Figure | SubFigure, d_model: int = 512, scaled: bool = True, init: str = "normal",
                         vocab_size: int = 1000, seed: int = 0) -> EmbeddingScale:
    """Histogram of the entries of both parts, and their sizes as bars (2 axes)."""
    check_figure(fig, "draw_embedding_scale")
    view = embedding_scale(d_model, scaled, init, vocab_size, seed=seed)
    hist_ax, bar_ax = fig.subplots(1, 2, width_ratios=(2, 1))
    limit = max(3.0, 1.2 * float(view.tokens.abs().max()))
    bins = np.linspace(-limit, limit, 81)
    hist_ax.hist(view.positions.flatten().numpy(), bins=bins, density=True, alpha=0.55, color="C1",
                 label="position part PE(pos)")
    hist_ax.hist(view.tokens.flatten().numpy(), bins=bins, density=True, alpha=0.55, color="C0",
                 label="token part" + (r" $\times\sqrt{d_{model}}$" if scaled else " (unscaled)"))
    hist_ax.set_yscale("log")
    hist_ax.set_xlabel("value of one entry")
    hist_ax.set_ylabel("density (log scale)")
    hist_ax.legend(fontsize=8, loc="upper right")
    hist_ax.set_title(f"d_model = {d_model}, init '{init}'", fontsize=10)
    bar_ax.bar([0, 1], [view.token_rms, view.position_rms], color=["C0", "C1"])
    bar_ax.set_xticks([0, 1], ["token", "position"])
    bar_ax.set_ylabel("RMS of an entry")
    bar_ax.set_title(f"token / position = {view.ratio:.3g}\ncos(sum, token) = {view.token_cosine:.2f}", fontsize=10)
    return view
