"""The boundary with ``torch.nn``'s own Transformer modules: lessons 04 to 06 and the tests compare with them.

Our masks say True = "may attend", ``nn.MultiheadAttention``'s True = "blocked": :func:`to_torch_nn_mask` is
the one place that converts. The ``*_to_torch`` functions build PyTorch modules holding a copy of our weights.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .layers import DecoderLayer, EncoderLayer, LayerNorm


def to_torch_nn_mask(mask: Tensor) -> Tensor:
    """Our padding mask (B, 1, 1, S) -> ``key_padding_mask`` (B, S); a (1, 1, T, S) mask -> ``attn_mask`` (T, S)."""
    if mask.dtype != torch.bool or mask.dim() != 4:
        raise ValueError(f"expected a bool mask of shape (B, 1, 1, S) or (1, 1, T, S), got {mask.dtype} "
                         f"{tuple(mask.shape)}")
    if mask.size(1) == 1 and mask.size(2) == 1:
        return ~mask[:, 0, 0, :]  # (B, S)
    if mask.size(0) == 1 and mask.size(1) == 1:
        return ~mask[0, 0]  # (T, S)
    raise ValueError(f"mask of shape {tuple(mask.shape)} has no nn.MultiheadAttention equivalent: "
                     "pass the padding mask (B, 1, 1, S) and the causal mask (1, 1, T, T) separately")


@torch.no_grad()
def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    # PyTorch stacks W_Q, W_K, W_V into one (3D, D) in_proj_weight.
    theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
    theirs.out_proj.weight.copy_(ours.w_o.weight)
    theirs.out_proj.bias.copy_(ours.w_o.bias)


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention(batch_first=True)`` holding a copy of ``mha``'s weights."""
    theirs = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, batch_first=True)
    _copy_attention(mha, theirs)
    return theirs.to(mha.w_q.weight.device)


def encoder_layer_to_torch(layer: EncoderLayer) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer(batch_first=True)`` holding a copy of ``layer``'s weights."""
    return _layer_to_torch(layer, nn.TransformerEncoderLayer, {"self_attn": "self_attn"})


def decoder_layer_to_torch(layer: DecoderLayer) -> nn.TransformerDecoderLayer:
    """An ``nn.TransformerDecoderLayer(batch_first=True)`` holding a copy of ``layer``'s weights."""
    attentions = {"self_attn": "self_attn", "cross_attn": "multihead_attn"}  # their name for cross-attention
    return _layer_to_torch(layer, nn.TransformerDecoderLayer, attentions)


@torch.no_grad()
def _layer_to_torch(layer: EncoderLayer | DecoderLayer, cls: type[nn.Module], attentions: dict[str, str]) -> Any:
    attn, ff = layer.self_attn, layer.feed_forward
    theirs = cls(attn.d_model, attn.n_heads, ff.linear1.out_features, dropout=attn.dropout, batch_first=True,
                 norm_first=layer.norm_first, layer_norm_eps=layer.norm1.eps)
    for ours_name, their_name in attentions.items():
        _copy_attention(getattr(layer, ours_name), getattr(theirs, their_name))
    theirs.linear1.load_state_dict(ff.linear1.state_dict())
    theirs.linear2.load_state_dict(ff.linear2.state_dict())
    for name, module in layer.named_children():
        if isinstance(module, LayerNorm):  # norm1, norm2 (and norm3): the same names and parameters as theirs
            getattr(theirs, name).load_state_dict(module.state_dict())
    return theirs.to(attn.w_q.weight.device)
