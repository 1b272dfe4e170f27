"""LayerNorm, the feed-forward network, and the encoder and decoder layers (sections 3.1-3.3): lessons 05 and 06.

Attribute names are ``nn.TransformerEncoderLayer``'s and ``nn.TransformerDecoderLayer``'s (our ``cross_attn`` is
their ``multihead_attn``), so weights map one to one. A layer returns ``(output, weights...)`` on ``need_weights``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .cache import KVCache, LayerCache


def dropped(dropout: nn.Dropout, x: Tensor) -> Tensor:
    """``dropout(x)``, skipping the call where it returns ``x`` (eval, p = 0): one-token steps are call-bound."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class LayerNorm(nn.Module):
    """Layer normalisation (Ba et al., 2016) of each position over its features, as ``nn.LayerNorm``. Lesson 05."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        # (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta, over the last axis, in one fused pass
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)  # (..., D)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position (section 3.3). Lesson 05."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)  # after the ReLU, as in nn.TransformerEncoderLayer

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(dropped(self.dropout, torch.relu(self.linear1(x))))  # (B, T, d_ff) -> (B, T, D)


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each with a residual connection and LayerNorm (section 3.1). Lesson 05.

    (B, S, D) -> (B, S, D), weights (B, H, S, S). With ``cache`` ``x`` holds only new positions (lesson 09).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None,
                 inner_dropout: float | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        inner = dropout if inner_dropout is None else inner_dropout  # attention weights, feed-forward hidden units
        self.self_attn = MultiHeadAttention(d_model, n_heads, inner, scaled, d_qk)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, inner)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor | None = None, cache: KVCache | None = None,
                need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        if self.norm_first:  # pre-LN, a departure: x + Dropout(Sublayer(LayerNorm(x)))
            h = self.norm1(x)
            attn, weights = self.self_attn(h, h, h, src_mask, need_weights, cache)
            x = x + dropped(self.dropout1, attn)
            x = x + dropped(self.dropout2, self.feed_forward(self.norm2(x)))
        else:  # post-LN, section 5.4: LayerNorm(x + Dropout(Sublayer(x)))
            attn, weights = self.self_attn(x, x, x, src_mask, need_weights, cache)
            x = self.norm1(x + dropped(self.dropout1, attn))  # (B, S, D)
            x = self.norm2(x + dropped(self.dropout2, self.feed_forward(x)))  # (B, S, D)
        return (x, weights) if need_weights else x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output, then feed-forward (section 3.1). Lesson 06.

    (B, T, D) and memory (B, S, D) -> (B, T, D), weights (B, H, T, T) and (B, H, T, S). ``cache``: lesson 08.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None,
                 inner_dropout: float | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        inner = dropout if inner_dropout is None else inner_dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, inner, scaled, d_qk)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, inner, scaled, d_qk)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, inner)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                cache: LayerCache | None = None,
                need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor, Tensor]:
        self_cache, cross_cache = (cache.self_attn, cache.cross_attn) if cache is not None else (None, None)
        if self.norm_first:  # pre-LN
            h = self.norm1(x)
            attn, self_weights = self.self_attn(h, h, h, tgt_mask, need_weights, self_cache)
            x = x + dropped(self.dropout1, attn)
            attn, cross_weights = self.cross_attn(self.norm2(x), memory, memory, src_mask, need_weights, cross_cache)
            x = x + dropped(self.dropout2, attn)
            x = x + dropped(self.dropout3, self.feed_forward(self.norm3(x)))
        else:  # post-LN, the paper
            attn, self_weights = self.self_attn(x, x, x, tgt_mask, need_weights, self_cache)  # the causal mask
            x = self.norm1(x + dropped(self.dropout1, attn))  # (B, T, D)
            # Section 3.2.3: queries from the decoder, keys and values from the encoder's output.
            attn, cross_weights = self.cross_attn(x, memory, memory, src_mask, need_weights, cross_cache)
            x = self.norm2(x + dropped(self.dropout2, attn))  # (B, T, D)
            x = self.norm3(x + dropped(self.dropout3, self.feed_forward(x)))  # (B, T, D)
        return (x, self_weights, cross_weights) if need_weights else x
