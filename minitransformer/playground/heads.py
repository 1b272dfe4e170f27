"""Lesson 04: more heads at the same d_model: different patterns, the same weights and the same cost.

The layer is built with the same seed for every h, so only the split of the same projections into heads differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

from ..attention import MultiHeadAttention
from ..embeddings import sinusoidal_positional_encoding
from ..utils import check_int
from .controls import check_figure, figure_size

__all__ = ["HeadPatterns", "draw_head_patterns", "head_patterns"]


@dataclass(frozen=True)
class HeadPatterns:
    """What :func:`head_patterns` computed."""

    tokens: list[str]
    weights: Tensor
    n_heads: int
    d_model: int
    d_k: int
    parameters: int
    flops: int
    expected_flops: int


def head_patterns(n_heads: int = 4, d_model: int = 64, sentence: str = "the cat sat on the mat because it was warm",
                  seed: int = 0) -> HeadPatterns:
    """Per-head attention of one layer on a fixed sentence, with its parameter and FLOP counts.

    Shape:
        ``weights`` is (h, T, T), T = number of words.
    """
    check_int(d_model, "d_model", 2, at_most=4096)
    if d_model % 2:
        raise ValueError(f"d_model must be even (the positional encoding pairs columns), got {d_model}")
    check_int(n_heads, "n_heads", 1, at_most=d_model)
    if d_model % n_heads:
        divisors = [h for h in range(1, d_model + 1) if d_model % h == 0]
        raise ValueError(f"n_heads must divide d_model={d_model} so that every head gets d_k = d_model / h features, "
                         f"got n_heads={n_heads}; try one of {divisors}")
    if not isinstance(sentence, str) or not sentence.split():
        raise ValueError(f"sentence must be some words separated by spaces, got {sentence!r}")
    words = sentence.split()
    if len(words) > 24:
        raise ValueError(f"sentence has {len(words)} words: expected at most 24, to keep the maps readable")
    length = len(words)
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    generator = torch.Generator().manual_seed(seed)
    table = torch.randn(len(vocab), d_model, generator=generator)  # (V, D)
    x = table[torch.tensor([[vocab[w] for w in words]])] + sinusoidal_positional_encoding(length, d_model)  # (1, T, D)
    with torch.random.fork_rng():  # the layer's initialisation draws from the global generator: restore it after
        torch.manual_seed(seed)
        layer = MultiHeadAttention(d_model, n_heads).eval()
    with torch.no_grad():
        # nn.Linear's own start makes scores of spread about 0.3 and nearly uniform maps; N(0, 2 / d_model)
        # queries and keys give scores of spread about 2 in every head, whatever h (the 1/sqrt(d_k) sees to
        # that), so the patterns are as peaked as a trained layer's.
        for linear in (layer.w_q, layer.w_k):
            linear.weight.normal_(0.0, (2.0 / d_model) ** 0.5, generator=generator)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        _, weights = layer(x, x, x, need_weights=True)  # (1, h, T, T)
    parameters = sum(p.numel() for p in layer.parameters())
    expected = 8 * length * d_model**2 + 4 * length**2 * d_model
    assert weights is not None
    return HeadPatterns(words, weights[0], n_heads, d_model, d_model // n_heads, parameters,
                        int(counter.get_total_flops()), expected)


@figure_size(10.0, 5.0)
def draw_head_patterns(fig: Figure | SubFigure, n_heads: int = 4, d_model: int = 64,
                       sentence: str = "the cat sat on the mat because it was warm", seed: int = 0,
                       ncols: int = 4) -> HeadPatterns:
    """One attention map per head on a shared 0-1 colour scale, then a colour bar: h + 1 axes.

    The counts (parameters, FLOPs, d_k) are in the x label of the figure.
    """
    check_figure(fig, "draw_head_patterns")
    view = head_patterns(n_heads, d_model, sentence, seed)
    check_int(ncols, "ncols", 1)
    cols = min(ncols, n_heads)
    rows = -(-n_heads // cols)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    length = len(view.tokens)
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= n_heads:
            ax.remove()
            continue
        image = ax.imshow(view.weights[index].numpy(), cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(f"head {index}", fontsize=9)
        ax.set_xticks(range(length), view.tokens, rotation=70, fontsize=7)
        ax.set_yticks(range(length), view.tokens, fontsize=7)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.supxlabel(f"h = {n_heads} heads x d_k = {view.d_k} = d_model {d_model};  parameters {view.parameters:,};  "
                  f"FLOPs {view.flops:,} (formula {view.expected_flops:,})", fontsize=9)
    return view
