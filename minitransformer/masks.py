"""Attention masks, with one convention for the whole package.

A mask is a bool tensor and ``True`` means "this query may attend to this key".
It broadcasts to the attention scores of shape (B, H, Tq, Tk):

* padding mask  (B, 1, 1, S): hides the padding keys of each sentence;
* causal mask   (1, 1, T, T): hides the keys after each query (the future);
* both at once: ``make_padding_mask(tgt, pad) & make_causal_mask(T)`` is (B, 1, T, T).

:func:`check_mask` holds masks to these shapes (plus (T, T) and per-query (B, 1 or H, Tq, S)),
not merely to broadcasting: a 3-D (B, 1, S) mask, common in other tutorials, is refused
with a hint (``mask[:, None]``), since with B == H it would broadcast over the heads.
Every attention in the package checks its mask with it.

This is the convention of ``F.scaled_dot_product_attention``. ``nn.MultiheadAttention``
uses the opposite one (True means "blocked"); :func:`minitransformer.interop.to_torch_nn_mask`
is the only place that converts between them. Taught in lessons 03 and 06.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .utils import check_memory


def make_padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Token ids (B, S) -> (B, 1, 1, S), True where the token is not padding: every query sees its sentence."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (B, S), got a tensor of shape {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def make_causal_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, T, T) lower-triangular, diagonal included: position t sees positions 0..t and nothing after."""
    # Under torch.compile the size is a symbolic integer (it changes from batch to batch) and
    # the checks are left out: formatting it fails, and reading the RAM's size splits the graph.
    if not torch.compiler.is_compiling():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive integer sequence length, got {size!r}")
        check_memory(size * size, f"make_causal_mask(size={size:,}) (a {size:,} x {size:,} bool mask)", device)
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)


def make_target_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Padding mask and causal mask of target ids (B, T) combined: (B, 1, T, T)."""
    return make_padding_mask(tgt, pad_id) & make_causal_mask(tgt.size(1), device=tgt.device)


MASK_SHAPES = "(B, 1, 1, Tk), (B, 1, Tq, Tk), (B, H, Tq, Tk), (1, 1, Tq, Tk) or (Tq, Tk)"


def check_mask(mask: Tensor, scores_shape: tuple[int, ...] | torch.Size, name: str = "mask") -> None:
    """Raise a clear error unless ``mask`` is a bool mask of one of the documented shapes.

    Broadcasting alone is not enough: a (B, 1, S) mask, the shape some other tutorials
    use, broadcasts against (B, H, Tq, Tk) scores whenever B equals H, and then every
    head reads another sentence's mask. So each axis is checked for what it means.

    For scores (B, H, Tq, Tk) (multi-head attention) the accepted shapes are:

    * 4-D (B or 1, 1 or H, 1 or Tq, Tk): padding mask (B, 1, 1, S), combined target
      mask (B, 1, T, T), per-query mask (B, 1, Tq, S) or (B, H, Tq, S), causal mask (1, 1, T, T);
    * 2-D (1 or Tq, Tk): one mask for every sentence and head, e.g. a causal (T, T).

    For scores of another rank R (the teaching function on (Tq, Tk) or (B, Tq, Tk)),
    a mask has rank R or 2, every axis 1 or the scores' size, and exactly Tk keys.

    Args:
        mask: the mask to check; True = may attend.
        scores_shape: shape of the attention scores, (B, H, Tq, Tk) or (..., Tq, Tk).
        name: what the caller calls the mask (``src_mask``, ``tgt_mask``...), for the message.

    Raises:
        TypeError: ``mask`` is not a bool tensor (the message says how to convert it).
        ValueError: its shape is not one of the above (the message says how to reshape it).
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a bool tensor (True = may attend), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{name} must have dtype torch.bool (True = may attend), got {mask.dtype}: convert it with "
            f"{name}.bool() if nonzero means 'may attend', or with {name} == 0 if it is an additive mask "
            "(0 = attend, -inf = blocked); or build it with make_padding_mask / make_causal_mask"
        )
    shape = tuple(mask.shape)
    problem = _mask_shape_problem(shape, scores_shape)
    if problem:
        raise ValueError(f"{name} has shape {shape} but the scores are {scores_shape}: {problem}")


def _mask_shape_problem(shape: tuple[int, ...], scores: tuple[int, ...]) -> str:
    """What is wrong with a mask of ``shape`` for ``scores`` (an empty string when nothing is)."""
    if len(scores) < 2:
        return "attention scores have at least two axes (Tq, Tk)"
    tq, tk = scores[-2:]
    if len(shape) == 2:
        if shape[1] != tk or shape[0] not in (1, tq):
            return (f"a 2-D mask is (Tq, Tk) = ({tq}, {tk}), the same for every sentence; "
                    "a (B, S) padding mask needs its head and query axes: use mask[:, None, None, :]")
        return ""
    if len(scores) == 4 and len(shape) == 3:
        return ("a 3-D mask is ambiguous against (B, H, Tq, Tk) (when B equals H it broadcasts over the heads "
                "and each head reads another sentence's mask); a padding mask is (B, 1, 1, S): "
                "use mask[:, None] for a (B, 1, S) or (B, Tq, S) mask")
    if len(shape) != len(scores):
        expected = MASK_SHAPES if len(scores) == 4 else f"{len(scores)}-D like the scores, or (Tq, Tk)"
        return f"expected a mask of shape {expected}"
    if shape[-1] != tk:
        return f"the mask covers {shape[-1]} keys but there are Tk = {tk} (the key length, S for a source)"
    if shape[0] not in (1, scores[0]) and len(scores) >= 3:
        return f"the mask is for {shape[0]} sentences but the batch has B = {scores[0]}"
    if len(scores) == 4 and shape[1] not in (1, scores[1]):
        return f"axis 1 is the heads: 1 (the same mask for every head) or H = {scores[1]}, got {shape[1]}"
    if shape[-2] not in (1, tq):
        return f"axis -2 is the queries: 1 (the same for every query) or Tq = {tq}, got {shape[-2]}"
    for axis, (m, s) in enumerate(zip(shape, scores)):
        if m not in (1, s):
            return f"axis {axis} of the mask has size {m}: expected 1 or {s}"
    return ""
