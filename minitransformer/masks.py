"""Attention masks, with one convention for the whole package.

A mask is a bool tensor and ``True`` means "this query may attend to this key".
It broadcasts to the attention scores of shape (B, H, Tq, Tk):

* padding mask  (B, 1, 1, S): hides the padding keys of each sentence;
* causal mask   (1, 1, T, T): hides the keys after each query (the future);
* both at once: ``make_padding_mask(tgt, pad) & make_causal_mask(T)`` is (B, 1, T, T).

This is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention``
uses the opposite one (True means "blocked"); :func:`minitransformer.interop.to_torch_nn_mask`
is the only place that converts between them. Taught in lessons 03 and 06.
"""

from __future__ import annotations

import torch
from torch import Tensor


def make_padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Mask that lets every query see the non-padding keys of its own sentence.

    Args:
        tokens: token ids, shape (B, S).
        pad_id: the id used for padding.

    Returns:
        Bool tensor of shape (B, 1, 1, S), True where the token is not padding.
    """
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (B, S), got a tensor of shape {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def make_causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Mask that lets position t see positions 0..t and nothing after it.

    Args:
        size: sequence length T.
        device: where to create the mask.

    Returns:
        Bool tensor of shape (1, 1, T, T), lower-triangular (diagonal included).
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive integer sequence length, got {size!r}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)


def make_target_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Padding mask and causal mask of a decoder input combined.

    Args:
        tgt: target token ids, shape (B, T).
        pad_id: the id used for padding.

    Returns:
        Bool tensor of shape (B, 1, T, T).
    """
    return make_padding_mask(tgt, pad_id) & make_causal_mask(tgt.size(1), device=tgt.device)


def check_mask(mask: Tensor, scores_shape: tuple[int, ...] | torch.Size) -> None:
    """Raise a clear error unless ``mask`` is a bool tensor that broadcasts to the scores.

    Args:
        mask: the mask to check.
        scores_shape: shape of the attention scores, (B, H, Tq, Tk) or (..., Tq, Tk).
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "build it with make_padding_mask / make_causal_mask"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but the scores are {scores_shape}: "
            "expected a mask broadcastable to (B, H, Tq, Tk)"
        )
