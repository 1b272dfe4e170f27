"""Lesson 05: post-LN (the paper) and pre-LN through depth, at initialisation: one backward pass of a random
encoder stack, the size of the residual stream and of each layer's gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from matplotlib.figure import Figure, SubFigure
from torch import Tensor, nn

from ..model import Encoder
from ..utils import check_int
from .controls import check_figure, figure_size

__all__ = ["LayerGradients", "draw_layer_gradients", "layer_gradients"]


@dataclass(frozen=True)
class LayerGradients:
    """What :func:`layer_gradients` measured."""

    gradient_norms: Tensor
    stream_norms: Tensor
    n_layers: int
    norm_first: bool


def layer_gradients(n_layers: int = 12, norm_first: bool = False, d_model: int = 64, n_heads: int = 4,
                    seed: int = 0) -> LayerGradients:
    """Per-layer gradient norms of an encoder stack at initialisation, post-LN or pre-LN.

    A stack of ``n_layers`` :class:`~minitransformer.layers.EncoderLayer` (d_ff = 4 d_model, no
    dropout, Xavier-uniform weights) maps a batch of random vectors (8 sentences of 16 positions,
    unit-variance entries); the loss is the mean squared distance to random targets. The same
    seed gives the same weights and data to both arrangements.

    Shape:
        ``gradient_norms`` (N,), ``stream_norms`` (N + 1,).
    """
    check_int(n_layers, "n_layers", 1, at_most=64)
    check_int(d_model, "d_model", 2, at_most=1024)
    check_int(n_heads, "n_heads", 1, at_most=d_model)
    if d_model % n_heads:
        raise ValueError(f"n_heads must divide d_model so that every head gets d_k = d_model / h features, "
                         f"got d_model={d_model} and n_heads={n_heads}")
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be True (pre-LN) or False (post-LN, the paper), got {norm_first!r}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(8, 16, d_model, generator=generator)  # (B, S, D)
    target = torch.randn(8, 16, d_model, generator=generator)  # (B, S, D)
    with torch.random.fork_rng():  # building and initialising the stack draws from the global generator
        torch.manual_seed(seed)
        encoder = Encoder(n_layers, d_model, n_heads, 4 * d_model, dropout=0.0, norm_first=norm_first)
        for p in encoder.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
    stream = [x.norm(dim=-1).mean()]
    with torch.enable_grad():  # also when called under torch.no_grad()
        h = x
        for layer in encoder.layers:
            h = layer(h)  # (B, S, D)
            stream.append(h.detach().norm(dim=-1).mean())
        if encoder.norm is not None:  # pre-LN ends with one more LayerNorm
            h = encoder.norm(h)
        ((h - target) ** 2).mean().backward()
    gradients = torch.stack([torch.cat([p.grad.flatten() for p in layer.parameters() if p.grad is not None]).norm()
                             for layer in encoder.layers])  # (N,)
    return LayerGradients(gradients, torch.stack(stream).detach(), n_layers, norm_first)


@figure_size(10.0, 3.6)
def draw_layer_gradients(fig: Figure | SubFigure, n_layers: int = 12, norm_first: bool = False,
                         d_model: int = 64, seed: int = 0, compare: bool = True) -> LayerGradients:
    """Gradient norm per layer (log scale) and the size of the residual stream: 2 axes.

    With ``compare`` the other arrangement is drawn too, thin and dashed.
    """
    check_figure(fig, "draw_layer_gradients")
    view = layer_gradients(n_layers, norm_first, d_model, seed=seed)
    shown = [view] + ([layer_gradients(n_layers, not norm_first, d_model, seed=seed)] if compare else [])
    grad_ax, stream_ax = fig.subplots(1, 2)
    for k, v in enumerate(shown):
        name = "pre-LN" if v.norm_first else "post-LN (paper)"
        style = {"lw": 1.8, "ms": 4, "ls": "-"} if k == 0 else {"lw": 1.0, "ms": 2, "ls": "--", "alpha": 0.6}
        color = "C1" if v.norm_first else "C0"
        grad_ax.plot(range(1, n_layers + 1), v.gradient_norms.numpy(), marker="o", color=color, label=name, **style)
        stream_ax.plot(range(n_layers + 1), v.stream_norms.numpy(), marker="o", color=color, label=name, **style)
    grad_ax.set_yscale("log")
    grad_ax.set_xlabel("layer")
    grad_ax.set_ylabel("gradient norm of the layer's weights")
    grad_ax.set_title(f"{n_layers} layers at initialisation", fontsize=10)
    stream_ax.set_xlabel("layer (0 = input)")
    stream_ax.set_ylabel(r"mean $\Vert x \Vert$ of the residual stream")
    stream_ax.set_ylim(bottom=0)
    for ax in (grad_ax, stream_ax):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    return view
