"""Scaled dot-product attention and multi-head attention (paper, sections 3.2.1 and 3.2.2): lessons 03 and 04."""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cache import KVCache
from .masks import check_mask


def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None, scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V (equation 1), step by step: ``(output, weights)``. Lesson 03.

    ``mask`` True = may attend; ``scale`` None is 1 / sqrt(d_k). NaN in the inputs is not checked (a pass over
    the data per call) and spreads to the output, even from a masked key (0 * NaN is NaN).
    """
    if query.size(-1) != key.size(-1):
        raise ValueError(
            f"query and key must have the same last dimension d_k, got {tuple(query.shape)} and {tuple(key.shape)}")
    if key.size(-2) != value.size(-2):
        raise ValueError(f"key and value must have the same length Tk, got {tuple(key.shape)} and {tuple(value.shape)}")
    if scale is None:
        scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))  # (..., Tq, Tk): Q K^T / sqrt(d_k)
    else:
        scores = query @ key.transpose(-2, -1) * scale  # (..., Tq, Tk)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))  # a blocked key gets weight exp(-inf) = 0
    weights = torch.softmax(scores, dim=-1)  # (..., Tq, Tk): each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a fully masked row is 0/0 = NaN: zeros instead
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights  # (..., Tq, Dv), (..., Tq, Tk)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). Lesson 04.

    Returns ``(output, weights)`` like ``nn.MultiheadAttention``: the weights (B, H, Tq, Tk) with
    ``need_weights=True``, else None and PyTorch's fused kernel computes the same output. A
    :class:`~minitransformer.cache.KVCache` keeps the keys and values of earlier decoding steps (lesson 08).
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, scaled: bool = True,
                 d_qk: int | None = None) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model must be divisible by n_heads, got d_model={d_model} and n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout  # on the attention weights
        self.scaled = scaled  # False: unscaled scores, an ablation of lesson 10
        self.d_qk = self.d_k if d_qk is None else d_qk  # Table 3 row B narrows queries and keys only
        # The h projections of each kind as one matrix: W_Q = [W_1^Q ... W_h^Q], split by a reshape.
        self.w_q = nn.Linear(d_model, n_heads * self.d_qk)
        self.w_k = nn.Linear(d_model, n_heads * self.d_qk)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.attn_dropout = nn.Dropout(dropout)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, H * Dk) -> (B, H, T, Dk): head i takes features i * Dk .. (i + 1) * Dk - 1."""
        batch, length, width = x.shape
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, H, T, Dk) -> (B, T, D): Concat(head_1, ..., head_h)."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                need_weights: bool = False, cache: KVCache | None = None) -> tuple[Tensor, Tensor | None]:
        """query (B, Tq, D), key and value (B, Tk, D), mask broadcastable to (B, H, Tq, Tk), True = may attend."""
        dtype = self.w_q.weight.dtype  # what only the layer knows; under autocast dtypes mix on purpose
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dtype != dtype and not torch.is_autocast_enabled(t.device.type):
                raise TypeError(_dtype_error(name, t.dtype, dtype))
        q = self.split_heads(self.w_q(query))  # (B, H, Tq, Dk): Q W_i^Q for every head i at once
        if cache is not None and cache.static and cache.key is not None and cache.value is not None:
            k, v = cache.key, cache.value  # (B, H, S, Dk): cross-attention projected the memory at the first step
        else:
            k = self.split_heads(self.w_k(key))  # (B, H, Tk, Dk)
            v = self.split_heads(self.w_v(value))  # (B, H, Tk, Dk)
            if cache is not None:
                k, v = cache.update(k, v)  # (B, H, cached + Tk, Dk)
        if mask is not None:  # only here are the scores' shape known, the cached keys included
            check_mask(mask, (q.size(0), self.n_heads, q.size(2), k.size(2)))
        scale = None if self.scaled else 1.0  # None: the paper's 1 / sqrt(d_k)
        weights = None
        if need_weights:
            heads, weights = scaled_dot_product_attention(
                q, k, v, mask, self.attn_dropout if self.training else None, scale)  # (B, H, Tq, Dk)
        else:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                                   dropout_p=self.dropout if self.training else 0.0)  # (B, H, Tq, Dk)
            if mask is None:  # unmasked, the fused kernel can turn a NaN query into a finite row: spread it
                heads = heads + 0.0 * q.sum(dim=-1, keepdim=True)
        return self.w_o(self.merge_heads(heads)), weights  # (B, Tq, D): Concat(heads) W_O

    def extra_repr(self) -> str:
        extra = (f", d_qk={self.d_qk}" if self.d_qk != self.d_k else "") + ("" if self.scaled else ", unscaled")
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}{extra}"


def _dtype_error(name: str, got: torch.dtype, weights: torch.dtype) -> str:
    if not got.is_floating_point:
        return (f"{name} must be a floating-point tensor of d_model-wide vectors, got dtype {got} "
                "(token ids are embedded first, e.g. with TokenEmbedding)")
    return (f"{name} has dtype {got} but the layer's weights are {weights}: convert the input with .to({weights}), "
            f"or the layer with .to({got})")
