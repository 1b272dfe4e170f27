"""Figures used by the lessons and the training command: attention maps, heat maps, curves.

Every function draws on a Matplotlib ``Axes`` (a new figure when none is given) and
returns it, so a lesson can arrange several plots in one figure.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.ticker import FormatStrFormatter


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
    """Draw one attention matrix: a row per query, a column per key.

    Args:
        weights: (Tq, Tk) attention weights, rows summing to 1.
        query_labels: Tq labels for the rows (the tokens that ask).
        key_labels: Tk labels for the columns (the tokens that are looked at).
        ax: where to draw; a new figure if None.
        title: axes title.
        colorbar: add a colour bar.
        annotate: write each weight in its cell (for small matrices).

    Returns:
        The Matplotlib Axes.
    """
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
    """Draw any 2-D array (a positional encoding table, an embedding matrix) with labelled axes.

    Args:
        values: (rows, columns) array.
        xlabel, ylabel: axis labels.
        ax: where to draw; a new figure if None.
        title: axes title.
        cmap: Matplotlib colour map.
        symmetric: centre the colour scale on 0.

    Returns:
        The Matplotlib Axes.
    """
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
    """Draw a run's training loss by step, with the validation loss at the end of each epoch.

    Args:
        steps: optimizer steps of the training-loss points.
        train_loss: training loss (label-smoothed, per target token) at those steps.
        val_steps: steps of the validation-loss points (epoch ends).
        val_loss: validation loss at those steps.
        ax: where to draw; a new figure if None.
        title: axes title.
        log_scale: logarithmic loss axis (the loss falls over orders of magnitude).

    Returns:
        The Matplotlib Axes.
    """
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

    Args:
        weights: (H, Tq, Tk) attention weights of one batch item, one matrix per head.
        query_labels: Tq labels for the rows, shown on the first column of the grid.
        key_labels: Tk labels for the columns, shown on the last row of the grid.
        titles: H subplot titles; "head 0", "head 1", ... when None.
        ncols: heads per row of the grid.
        cell_size: width and height of one subplot, in inches.
        suptitle: title of the whole figure.
        annotate: write each weight in its cell (for small matrices).

    Returns:
        The Matplotlib Figure.
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

    Args:
        series: run name -> one value per layer, in layer order.
        ylabel: what the values are.
        ax: where to draw; a new figure if None.
        title: axes title.
        log_scale: logarithmic value axis (gradients vanish over orders of magnitude).
        xlabel: label of the layer axis.
        first_layer: number of the first value's layer (1, or 0 when index 0 is the input).

    Returns:
        The Matplotlib Axes.
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
