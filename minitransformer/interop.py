"""The boundary with ``torch.nn``'s own Transformer modules.

Our masks say True = "may attend"; ``nn.MultiheadAttention`` and ``nn.Transformer*Layer``
say True = "blocked". :func:`to_torch_nn_mask` is the one place that converts. The
``*_to_torch`` functions build PyTorch modules holding a copy of our weights, which is
how the tests and lessons show that both compute the same numbers.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .layers import DecoderLayer, EncoderLayer, LayerNorm, PositionwiseFeedForward


def to_torch_nn_mask(mask: Tensor) -> Tensor:
    """Convert one of our masks to ``nn.MultiheadAttention``'s convention.

    * padding mask (B, 1, 1, S) -> ``key_padding_mask`` (B, S), True = padding;
    * causal or other (1, 1, T, S) mask -> ``attn_mask`` (T, S), True = blocked.

    Args:
        mask: bool mask in this package's convention (True = may attend).

    Returns:
        The inverted mask with the leading singleton dimensions removed.
    """
    if mask.dtype != torch.bool or mask.dim() != 4:
        raise ValueError(f"expected a bool mask of shape (B, 1, 1, S) or (1, 1, T, S), got {mask.dtype} {tuple(mask.shape)}")
    if mask.size(1) == 1 and mask.size(2) == 1:
        return ~mask[:, 0, 0, :]  # (B, S)
    if mask.size(0) == 1 and mask.size(1) == 1:
        return ~mask[0, 0]  # (T, S)
    raise ValueError(
        f"mask of shape {tuple(mask.shape)} has no nn.MultiheadAttention equivalent: "
        "pass the padding mask (B, 1, 1, S) and the causal mask (1, 1, T, T) separately"
    )


@torch.no_grad()
def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    # PyTorch stacks W_Q, W_K, W_V into one (3D, D) in_proj_weight.
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


@torch.no_grad()
def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    theirs.weight.copy_(ours.weight)
    theirs.bias.copy_(ours.bias)


@torch.no_grad()
def _copy_feed_forward(ours: PositionwiseFeedForward, theirs: nn.Module) -> None:
    theirs.linear1.load_state_dict(ours.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.linear2.state_dict())


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` holding a copy of ``mha``'s weights."""
    theirs = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, batch_first=True)
    _copy_attention(mha, theirs)
    return theirs.to(mha.w_q.weight.device)


def encoder_layer_to_torch(layer: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer(batch_first=True)`` holding a copy of ``layer``'s weights."""
    attn = layer.self_attn
    theirs = nn.TransformerEncoderLayer(
        attn.d_model, attn.n_heads, layer.feed_forward.linear1.out_features, dropout=attn.dropout,
        batch_first=True, norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
    )
    _copy_attention(attn, theirs.self_attn)
    _copy_feed_forward(layer.feed_forward, theirs)
    _copy_norm(layer.norm1, theirs.norm1)
    _copy_norm(layer.norm2, theirs.norm2)
    return theirs.to(attn.w_q.weight.device)


def decoder_layer_to_torch(layer: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer(batch_first=True)`` holding a copy of ``layer``'s weights."""
    attn = layer.self_attn
    theirs = nn.TransformerDecoderLayer(
        attn.d_model, attn.n_heads, layer.feed_forward.linear1.out_features, dropout=attn.dropout,
        batch_first=True, norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps,
    )
    _copy_attention(layer.self_attn, theirs.self_attn)
    _copy_attention(layer.cross_attn, theirs.multihead_attn)
    _copy_feed_forward(layer.feed_forward, theirs)
    for ours_norm, their_norm in ((layer.norm1, theirs.norm1), (layer.norm2, theirs.norm2),
                                  (layer.norm3, theirs.norm3)):
        _copy_norm(ours_norm, their_norm)
    return theirs.to(attn.w_q.weight.device)
