"""Scaled dot-product attention and multi-head attention (paper, sections 3.2.1 and 3.2.2).

Taught in lessons 03 (self-attention) and 04 (multi-head attention).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cache import KVCache
from .masks import check_mask


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, computed step by step.

    This is the teaching version: it materialises the weights so they can be
    plotted. :class:`MultiHeadAttention` uses PyTorch's fused kernel when the
    weights are not needed; both give the same output.

    Args:
        query: (..., Tq, Dk).
        key: (..., Tk, Dk).
        value: (..., Tk, Dv).
        mask: bool, broadcastable to (..., Tq, Tk); True = may attend.
        dropout: applied to the weights before they average the values (e.g. an ``nn.Dropout``).
        scale: factor of the scores; None is the paper's 1 / sqrt(d_k) (1.0: unscaled, an ablation).

    Returns:
        ``(output, weights)``: output (..., Tq, Dv); weights (..., Tq, Tk), each row sums
        to 1 and masked keys get exactly 0. A query whose keys are all masked gets a row
        of zero weights and a zero output (not NaN).

    Non-finite inputs are not checked: a check would cost a pass over the tensors and,
    on a GPU, a synchronisation at every call. NaN or inf in ``query``, ``key`` or
    ``value`` spreads to the output, as in PyTorch, even from a masked key (its weight
    is 0, and 0 * NaN is NaN).
    """
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must have the same last dimension d_k, got {tuple(query.shape)} and {tuple(key.shape)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"key and value must have the same length Tk, got {tuple(key.shape)} and {tuple(value.shape)}"
        )
    d_k = query.size(-1)
    if scale is None:
        scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Tq, Tk)
    else:
        scores = query @ key.transpose(-2, -1) * scale  # (..., Tq, Tk)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        # A query whose keys are all masked has a row of NaN (0/0); give it zeros instead.
        weights = weights.masked_fill(~mask, 0.0)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights  # (..., Tq, Dv), (..., Tq, Tk)


class MultiHeadAttention(nn.Module):
    """h attention heads over learned projections, concatenated and projected by W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i).

    The h projections of each kind are stored as one ``nn.Linear(d_model, d_model)``
    and split into heads by a reshape, which is the same computation done at once.

    Args:
        d_model: model width D.
        n_heads: number of heads H; d_k = D / H.
        dropout: dropout on the attention weights.
        scaled: divide the scores by sqrt(d_k) (the paper); False leaves them unscaled (lesson 10).
        d_qk: per-head width of queries and keys, when not d_model / n_heads (Table 3 row B);
            values keep d_model / n_heads.

    Shape:
        query (B, Tq, D), key and value (B, Tk, D); mask (B, 1, 1, Tk), (B, 1, Tq, Tk),
        (B, H, Tq, Tk), (1, 1, Tq, Tk) or (Tq, Tk), checked by
        :func:`~minitransformer.masks.check_mask` (a 3-D mask is refused).
        Returns output (B, Tq, D) and weights (B, H, Tq, Tk) or None.

    NaN or inf in the inputs is not checked and spreads to the output (see
    :func:`scaled_dot_product_attention`), with or without ``need_weights``: PyTorch's
    fused kernel alone, called without a mask, can return a finite row for a NaN query, so
    the fused path then adds ``0 * sum(q)`` to each query's output, which is 0 for a finite
    query and NaN otherwise (with a mask the kernel spreads the NaN itself).

    Inputs must be floating-point tensors of the weights' dtype (float32 by default; call
    ``.double()`` on the layer for float64), or any float dtype under autocast. The inputs
    and the mask are checked at every call unless ``checked=True`` says that the caller has
    done so (the :class:`~minitransformer.model.Transformer` checks once per forward pass).

    With a :class:`~minitransformer.cache.KVCache`, the keys and values of earlier steps
    are reused: a static (cross-attention) cache projects ``key``/``value`` once; a
    self-attention cache appends the new positions and attends over all of them.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, scaled: bool = True,
                 d_qk: int | None = None) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model} and n_heads={n_heads}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        self.scaled = scaled
        self.d_qk = self.d_k if d_qk is None else d_qk
        self.w_q = nn.Linear(d_model, n_heads * self.d_qk)
        self.w_k = nn.Linear(d_model, n_heads * self.d_qk)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.attn_dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, H, T, Dk); queries and keys of width H * d_qk give (B, H, T, d_qk)."""
        batch, length, width = x.shape
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)  # (B, H, T, Dk)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, H, T, Dk) -> (B, T, D): the concatenation of the heads."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)  # (B, T, D)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        checked: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if not checked:
            self.check_inputs(query, key, value)
        q = self.split_heads(self.w_q(query))  # (B, H, Tq, Dk)
        if cache is not None and cache.static and cache.key is not None and cache.value is not None:
            k, v = cache.key, cache.value  # (B, H, Tk, Dk), projected at the first step
        else:
            k = self.split_heads(self.w_k(key))  # (B, H, Tk, Dk)
            v = self.split_heads(self.w_v(value))  # (B, H, Tk, Dk)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H, Tk_cached + Tk, Dk)
        if mask is not None and not checked:
            check_mask(mask, (q.size(0), self.n_heads, q.size(2), k.size(2)))
        weights: Tensor | None
        if need_weights:
            heads, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout=self.attn_dropout if self.training else None,
                scale=None if self.scaled else 1.0,
            )
        else:
            heads = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0,
                scale=None if self.scaled else 1.0,
            )  # (B, H, Tq, Dk)
            if mask is None:  # with a mask the kernel already spreads a NaN query (tested)
                heads = heads + 0.0 * q.sum(dim=-1, keepdim=True)  # NaN spreads from a query as in the unfused path
            weights = None
        return self.w_o(self.merge_heads(heads)), weights  # (B, Tq, D), (B, H, Tq, Tk) | None

    def check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """Shapes and dtypes of ``forward``'s inputs; raises a one-line error for the first wrong one."""
        weights_dtype = self.w_q.weight.dtype
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.size(-1) != self.d_model:
                raise ValueError(f"{name} must have shape (B, T, {self.d_model}), got {tuple(t.shape)}")
            if not t.is_floating_point():
                raise TypeError(f"{name} must be a floating-point tensor of d_model-wide vectors, got dtype {t.dtype} "
                                "(token ids are embedded first, e.g. with TokenEmbedding)")
            if t.dtype != weights_dtype and not torch.is_autocast_enabled(t.device.type):
                raise TypeError(f"{name} has dtype {t.dtype} but the layer's weights are {weights_dtype}: convert the "
                                f"input with .to({weights_dtype}), or the layer with .to({t.dtype})")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key and value must have the same (B, Tk), got {tuple(key.shape)} and {tuple(value.shape)}")
        if query.size(0) != key.size(0):
            raise ValueError(f"query and key must have the same batch size B, got {tuple(query.shape)} and {tuple(key.shape)}")

    def extra_repr(self) -> str:
        extra = (f", d_qk={self.d_qk}" if self.d_qk != self.d_k else "") + ("" if self.scaled else ", unscaled")
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}{extra}"
