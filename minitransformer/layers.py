"""Layer normalization, the feed-forward network, and the encoder and decoder layers (section 3.1-3.3).

Taught in lessons 05 (add & norm, feed-forward) and 06 (decoder and masking).
Attribute names follow ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``
(``self_attn``, ``norm1``...; our ``cross_attn`` is their ``multihead_attn``) so that
weights map one to one; see :mod:`minitransformer.interop`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .cache import KVCache, LayerCache


def dropped(dropout: nn.Dropout, x: Tensor) -> Tensor:
    """``dropout(x)``, without the module call when it would return ``x`` unchanged (eval mode or p = 0).

    The same result as calling the module; it saves a module call per sub-layer on the hot
    paths (one-token decoding steps are dominated by such per-call costs, not by arithmetic).
    """
    return dropout(x) if dropout.training and dropout.p > 0 else x


class LayerNorm(nn.Module):
    """Layer normalization (Ba et al., 2016): normalise each position over its d_model features.

    y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta, mean and (biased) variance over the
    last dimension, so every position is normalised on its own, whatever the batch size.
    ``weight`` is gamma and ``bias`` is beta, named as in ``nn.LayerNorm``.

    Lesson 05 derives the formula line by line; ``forward`` hands the same computation to
    PyTorch's fused kernel (one pass over the data instead of five, which matters in the
    training hot path), and the tests check that both agree.

    Shape:
        Input (..., D); output (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)  # (..., D)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same two layers at every position (section 3.3).

    Dropout sits after the ReLU, as in ``nn.TransformerEncoderLayer``.

    Shape:
        Input (B, T, D); output (B, T, D); the hidden layer is (B, T, d_ff).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(dropped(self.dropout, torch.relu(self.linear1(x))))  # (B, T, D)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped in a residual connection and LayerNorm.

    Post-LN (the paper, ``norm_first=False``): x = LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (a departure, ``norm_first=True``): x = x + Dropout(Sublayer(LayerNorm(x))).
    ``scaled`` and ``d_qk`` go to :class:`MultiHeadAttention` (ablations of lesson 10).

    Shape:
        x (B, S, D), src_mask broadcastable to (B, H, S, S); output (B, S, D).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, scaled, d_qk)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor | None = None, cache: KVCache | None = None,
                checked: bool = False) -> Tensor:
        return self.forward_with_weights(x, src_mask, need_weights=False, cache=cache, checked=checked)[0]

    def forward_with_weights(self, x: Tensor, src_mask: Tensor | None = None,
                             need_weights: bool = True,
                             cache: KVCache | None = None, checked: bool = False) -> tuple[Tensor, Tensor | None]:
        """Like ``forward``, also returning the self-attention weights (B, H, S, S).

        ``checked=True``: the caller has checked ``x`` and the mask (the model does, once per
        pass), so the attention does not check them again.

        With ``cache`` (used by the decoder-only language model of lesson 09, whose blocks are
        encoder layers under a causal mask), ``x`` holds only the new positions and attends to
        the cached ones too; the weights are then (B, H, S_new, S_cached + S_new).
        """
        if self.norm_first:
            h = self.norm1(x)
            attn, weights = self.self_attn(h, h, h, src_mask, need_weights=need_weights, cache=cache, checked=checked)
            x = x + dropped(self.dropout1, attn)
            x = x + dropped(self.dropout2, self.feed_forward(self.norm2(x)))
        else:
            attn, weights = self.self_attn(x, x, x, src_mask, need_weights=need_weights, cache=cache, checked=checked)
            x = self.norm1(x + dropped(self.dropout1, attn))
            x = self.norm2(x + dropped(self.dropout2, self.feed_forward(x)))
        return x, weights  # (B, S, D)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output, then feed-forward.

    Each of the three sub-layers has its own residual connection and LayerNorm
    (``norm1``, ``norm2``, ``norm3``), post-LN by default as in the paper.

    Shape:
        x (B, T, D), memory (B, S, D), src_mask broadcastable to (B, H, T, S),
        tgt_mask broadcastable to (B, H, T, T); output (B, T, D).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, scaled, d_qk)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout, scaled, d_qk)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, cache: LayerCache | None = None, checked: bool = False) -> Tensor:
        return self.forward_with_weights(x, memory, src_mask, tgt_mask, need_weights=False, cache=cache,
                                         checked=checked)[0]

    def forward_with_weights(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
        need_weights: bool = True, cache: LayerCache | None = None, checked: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Like ``forward``, also returning self-attention (B, H, T, T) and cross-attention (B, H, T, S) weights.

        With ``cache``, ``x`` holds only the new positions and attends to the cached ones too.
        ``checked=True``: the caller has checked the inputs and masks (the model does, once per pass).
        """
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        if self.norm_first:
            h = self.norm1(x)
            attn, self_weights = self.self_attn(h, h, h, tgt_mask, need_weights=need_weights, cache=self_cache,
                                                 checked=checked)
            x = x + dropped(self.dropout1, attn)
            attn, cross_weights = self.cross_attn(self.norm2(x), memory, memory, src_mask,
                                                  need_weights=need_weights, cache=cross_cache, checked=checked)
            x = x + dropped(self.dropout2, attn)
            x = x + dropped(self.dropout3, self.feed_forward(self.norm3(x)))
        else:
            attn, self_weights = self.self_attn(x, x, x, tgt_mask, need_weights=need_weights, cache=self_cache,
                                                 checked=checked)
            x = self.norm1(x + dropped(self.dropout1, attn))
            attn, cross_weights = self.cross_attn(x, memory, memory, src_mask, need_weights=need_weights,
                                                  cache=cross_cache, checked=checked)
            x = self.norm2(x + dropped(self.dropout2, attn))
            x = self.norm3(x + dropped(self.dropout3, self.feed_forward(x)))
        return x, self_weights, cross_weights  # (B, T, D), ...
