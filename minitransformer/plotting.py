"""Figures used by the lessons and the training command: attention maps, heat maps, curves.

Every function draws on a Matplotlib ``Axes`` (a new figure when none is given) and
returns it, so a lesson can arrange several plots in one figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.ticker import FormatStrFormatter

if TYPE_CHECKING:
    from .config import TransformerConfig


def _to_numpy(values: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().float().cpu().numpy()
    return np.asarray(values)


def plot_attention(
    weights: torch.Tensor | np.ndarray,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    colorbar: bool = True,
    annotate: bool = False,
) -> Axes:
    """Draw one attention matrix: a row per query, a column per key."""
    matrix = _to_numpy(weights)
    if matrix.ndim != 2:
        raise ValueError(f"weights must be one (Tq, Tk) matrix, got shape {matrix.shape}; pick a batch item and head")
    if query_labels is not None and len(query_labels) != matrix.shape[0]:
        raise ValueError(f"{len(query_labels)} query labels for {matrix.shape[0]} rows")
    if key_labels is not None and len(key_labels) != matrix.shape[1]:
        raise ValueError(f"{len(key_labels)} key labels for {matrix.shape[1]} columns")
    if ax is None:
        size = (max(3.0, 0.45 * matrix.shape[1] + 1.5), max(2.5, 0.45 * matrix.shape[0] + 1.0))
        _, ax = plt.subplots(figsize=size)
    image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=max(float(matrix.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(matrix.shape[1]))
    ax.set_yticks(range(matrix.shape[0]))
    if key_labels is not None:
        ax.set_xticklabels(key_labels, rotation=60, ha="right")
    if query_labels is not None:
        ax.set_yticklabels(query_labels)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if annotate:
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                value = matrix[i, j]
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if value < 0.6 * matrix.max() else "black")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_heatmap(
    values: torch.Tensor | np.ndarray,
    xlabel: str,
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "RdBu_r",
    symmetric: bool = True,
) -> Axes:
    """Draw any 2-D array (a positional encoding table, an embedding matrix) with labelled axes."""
    matrix = _to_numpy(values)
    if matrix.ndim != 2:
        raise ValueError(f"values must be 2-D, got shape {matrix.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    limit = float(np.abs(matrix).max()) if symmetric else None
    image = ax.imshow(matrix, cmap=cmap, aspect="auto", interpolation="nearest",
                      vmin=-limit if limit else None, vmax=limit)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax)
    return ax


def plot_loss_curve(
    steps: Sequence[int],
    train_loss: Sequence[float],
    val_steps: Sequence[int] | None = None,
    val_loss: Sequence[float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    log_scale: bool = True,
) -> Axes:
    """Draw a run's training loss by step, with the validation loss at the end of each epoch."""
    if len(steps) != len(train_loss):
        raise ValueError(f"expected one loss per step, got {len(steps)} steps and {len(train_loss)} losses")
    if (val_steps is None) != (val_loss is None) or (val_steps is not None and len(val_steps) != len(val_loss)):
        raise ValueError("val_steps and val_loss must be given together, one loss per step")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, train_loss, label="training", linewidth=1.2)
    if val_steps:
        ax.plot(val_steps, val_loss, "o-", label="validation", linewidth=1.2, markersize=4)
    if log_scale:
        ax.set_yscale("log")
        # Plain numbers (0.9, 2, 5) read better than 2x10^0 on a loss axis.
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss per target token")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


def plot_attention_heads(
    weights: torch.Tensor | np.ndarray,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    ncols: int = 4,
    cell_size: float = 2.4,
    suptitle: str | None = None,
    annotate: bool = False,
) -> plt.Figure:
    """Draw the attention matrix of every head in a grid, on one shared 0-to-1 colour scale.

    Used by lesson 04 (multi-head attention) and for the maps of a trained model.
    """
    stack = _to_numpy(weights)
    if stack.ndim != 3:
        raise ValueError(f"weights must be (H, Tq, Tk) for one batch item, got shape {stack.shape}")
    n_heads = stack.shape[0]
    if titles is not None and len(titles) != n_heads:
        raise ValueError(f"{len(titles)} titles for {n_heads} heads")
    ncols = max(1, min(ncols, n_heads))
    nrows = -(-n_heads // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(cell_size * ncols + 1.0, cell_size * nrows + 0.4),
                             squeeze=False, constrained_layout=True)
    for index, ax in enumerate(axes.flat):
        if index >= n_heads:
            ax.axis("off")
            continue
        row, col = divmod(index, ncols)
        plot_attention(stack[index], query_labels, key_labels, ax=ax, colorbar=False, annotate=annotate,
                       title=titles[index] if titles is not None else f"head {index}")
        ax.images[0].set_clim(0.0, 1.0)
        if col != 0:
            ax.set_ylabel("")
            ax.set_yticklabels([])
        if row != nrows - 1 and index + ncols < n_heads:
            ax.set_xlabel("")
            ax.set_xticklabels([])
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.8, label="attention weight")
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def plot_layer_values(
    series: dict[str, Sequence[float]],
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    log_scale: bool = True,
    xlabel: str = "layer",
    first_layer: int = 1,
) -> Axes:
    """Draw one value per layer (a gradient norm, an activation norm) for several runs.

    Used by lesson 05 to compare deep stacks with and without residual connections,
    and post-LN with pre-LN.
    """
    if not series:
        raise ValueError("series is empty: expected at least one run name -> values per layer")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in series.items():
        values = _to_numpy(torch.as_tensor(values)).ravel()
        ax.plot(np.arange(first_layer, first_layer + len(values)), values, "o-", markersize=3,
                linewidth=1.2, label=name)
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


def plot_model_diagram(config: TransformerConfig, ax: Axes | None = None) -> Axes:
    """Draw the whole encoder-decoder, in the spirit of the paper's Figures 1 and 2.

    Each box names the lesson that builds it; each arrow carries the shape of the tensor it
    carries for ``config`` (B batch, S source length, T target length; D = d_model, V the target
    vocabulary). Drawn by code from the config, so other sizes give other labels.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    if ax is None:
        _, ax = plt.subplots(figsize=(11, 9.6))
    D, H, V, F = config.d_model, config.n_heads, config.tgt_vocab_size, config.d_ff
    ax.set(xlim=(0, 11), ylim=(-0.2, 10.6))
    ax.axis("off")
    colours = {"embed": "#fde2c4", "attn": "#ffe9a8", "ffn": "#cfe8ff", "norm": "#e6e6e6", "out": "#d9f2d9"}
    width, height = 3.9, 0.5

    def box(x: float, y: float, label: str, lesson: str, kind: str) -> None:
        ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.02",
                                    facecolor=colours[kind], edgecolor="black", linewidth=1))
        ax.text(x, y + 0.08, label, ha="center", va="center", fontsize=10)
        ax.text(x, y - 0.15, lesson, ha="center", va="center", fontsize=8, color="#444444")

    def arrow(x0: float, y0: float, x1: float, y1: float, shape: str = "", side: float = 0.1,
              gid: str | None = None) -> None:
        ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=11, linewidth=1.1,
                                     color="black", shrinkA=0, shrinkB=0, gid=gid))
        if shape:  # a negative side puts the shape on the left of the arrow
            ax.text((x0 + x1) / 2 + side, (y0 + y1) / 2, shape, ha="left" if side > 0 else "right", va="center",
                    fontsize=8.5, color="#1f4e9c", family="monospace")

    def residual(x: float, y_from: float, y_norm: float, right: bool = False) -> None:
        """x carried around a sub-layer: from its input at (x, y_from) into the add & norm box at y_norm."""
        edge = x + width / 2 if right else x - width / 2
        bypass = edge + 0.18 if right else edge - 0.18
        ax.plot([x, bypass, bypass], [y_from, y_from, y_norm], color="black", linewidth=1.1, gid="residual")
        ax.plot([x], [y_from], "o", color="black", markersize=3.5, gid="residual")
        arrow(bypass, y_norm, edge, y_norm, gid="residual")

    def stack(x: float, y0: float, y1: float, label: str, right: bool = False) -> None:
        ax.add_patch(FancyBboxPatch((x - width / 2 - 0.25, y0), width + 0.5, y1 - y0, boxstyle="round,pad=0.05",
                                    facecolor="#f7f7f7", edgecolor="#777777", linewidth=1, linestyle="--", zorder=0))
        side = x + width / 2 + 0.4 if right else x - width / 2 - 0.4
        ax.text(side, (y0 + y1) / 2, label, ha="left" if right else "right", va="center", fontsize=9, rotation=90)

    xe, xd = 2.9, 8.0
    # Encoder, bottom to top.
    box(xe, 0.6, "source tokens src", "lesson 01: BPE ids", "embed")
    arrow(xe, 0.85, xe, 1.35, "(B, S)")
    box(xe, 1.6, f"token embedding x sqrt({D})", "lesson 01", "embed")
    arrow(xe, 1.85, xe, 2.35, f"(B, S, {D})")
    box(xe, 2.6, "+ positional encoding", "lesson 02", "embed")
    arrow(xe, 2.85, xe, 3.55, f"(B, S, {D})")
    stack(xe, 3.15, 7.0, f"encoder layer, x {config.n_encoder_layers} (lesson 05)")
    box(xe, 3.8, f"multi-head self-attention, {H} heads", f"lessons 03, 04: d_k = {D // H}, padding mask", "attn")
    arrow(xe, 4.05, xe, 4.55, f"(B, S, {D})")
    box(xe, 4.8, "add & norm: LayerNorm(x + sublayer(x))", "lesson 05", "norm")
    arrow(xe, 5.05, xe, 5.55, f"(B, S, {D})")
    box(xe, 5.8, f"feed-forward {D} -> {F} -> {D}", "lesson 05", "ffn")
    arrow(xe, 6.05, xe, 6.45, f"(B, S, {D})")
    box(xe, 6.7, "add & norm: LayerNorm(x + sublayer(x))", "lesson 05", "norm")
    residual(xe, 3.35, 4.8)  # around the self-attention
    residual(xe, 5.15, 6.7)  # around the feed-forward network
    # memory goes to the cross-attention of every decoder layer
    ax.plot([xe, xe, 5.35, 5.35], [6.95, 7.6, 7.6, 5.5], color="black", linewidth=1.1)
    arrow(5.35, 5.5, xd - width / 2, 5.5)
    ax.text(xe + 0.1, 7.3, f"memory (B, S, {D})", ha="left", va="center", fontsize=8.5, color="#1f4e9c",
            family="monospace")
    ax.text(xe, 0.05, "ENCODER", ha="center", va="center", fontsize=11, weight="bold")

    # Decoder, bottom to top; the shapes on the left of the arrows, the residual connections on the right.
    box(xd, 0.6, "target tokens, shifted right", "lesson 06: <bos> first", "embed")
    arrow(xd, 0.85, xd, 1.35, "(B, T)", side=-0.1)
    box(xd, 1.6, f"token embedding x sqrt({D})", "lesson 01: shared table", "embed")
    arrow(xd, 1.85, xd, 2.35, f"(B, T, {D})", side=-0.1)
    box(xd, 2.6, "+ positional encoding", "lesson 02", "embed")
    arrow(xd, 2.85, xd, 3.35, f"(B, T, {D})", side=-0.1)
    stack(xd, 3.0, 8.55, f"decoder layer, x {config.n_decoder_layers} (lesson 06)", right=True)
    box(xd, 3.6, "masked multi-head self-attention", "lesson 06: causal mask", "attn")
    arrow(xd, 3.85, xd, 4.3, f"(B, T, {D})", side=-0.1)
    box(xd, 4.55, "add & norm: LayerNorm(x + sublayer(x))", "lesson 05", "norm")
    arrow(xd, 4.8, xd, 5.25, f"(B, T, {D})", side=-0.1)
    box(xd, 5.5, "cross-attention: Q from here", "lesson 06: K, V from memory", "attn")
    arrow(xd, 5.75, xd, 6.2, f"(B, T, {D})", side=-0.1)
    box(xd, 6.45, "add & norm: LayerNorm(x + sublayer(x))", "lesson 05", "norm")
    arrow(xd, 6.7, xd, 7.15, f"(B, T, {D})", side=-0.1)
    box(xd, 7.4, f"feed-forward {D} -> {F} -> {D}", "lesson 05", "ffn")
    arrow(xd, 7.65, xd, 8.0, f"(B, T, {D})", side=-0.1)
    box(xd, 8.25, "add & norm: LayerNorm(x + sublayer(x))", "lesson 05", "norm")
    residual(xd, 3.15, 4.55, right=True)  # around the masked self-attention
    residual(xd, 4.9, 6.45, right=True)  # around the cross-attention
    residual(xd, 6.8, 8.25, right=True)  # around the feed-forward network
    arrow(xd, 8.5, xd, 9.0, f"(B, T, {D})", side=-0.1)
    tied = " (tied to the embedding)" if config.tie_embeddings else ""
    box(xd, 9.25, f"linear {D} -> {V:,}", f"lessons 01, 06{tied}", "out")
    arrow(xd, 9.5, xd, 9.9, f"(B, T, {V})", side=-0.1)
    box(xd, 10.15, "softmax: next-token probabilities", "lessons 03, 06", "out")
    ax.text(xd, 0.05, "DECODER", ha="center", va="center", fontsize=11, weight="bold")
    ax.set_title(f"The Transformer: D = {D}, {H} heads, d_ff = {F}, V = {V:,}\n"
                 "side arrows: the residual connections, x carried around each sub-layer to its add & norm",
                 fontsize=11)
    return ax
