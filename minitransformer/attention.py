"""Scaled dot-product attention and multi-head attention (paper, sections 3.2.1 and 3.2.2).

Taught in lessons 03 (self-attention) and 04 (multi-head attention).
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping
from typing import Any, Callable

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
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Tq, Tk)
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


#: The three projections stacked, in this order, in :attr:`MultiHeadAttention.w_qkv`.
PROJECTIONS = ("w_q", "w_k", "w_v")


class ProjectionView:
    """One of W_Q, W_K, W_V of a :class:`MultiHeadAttention`: a view of D rows of its fused ``w_qkv``.

    Reads like the ``nn.Linear(d_model, d_model)`` it replaces: ``.weight`` (D, D) and ``.bias``
    (D,) are views of the fused parameters (no copy; writing into them under ``torch.no_grad()``
    writes into the fused matrix), and calling it applies the projection.

    Shape:
        Input (..., D); output (..., D).
    """

    def __init__(self, fused: nn.Linear, index: int, width: int) -> None:
        rows = slice(index * width, (index + 1) * width)
        self.weight: Tensor = fused.weight[rows]  # (D, D)
        self.bias: Tensor = fused.bias[rows]  # (D,)
        self.in_features = self.out_features = width

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)  # (..., D)

    def __repr__(self) -> str:
        return f"ProjectionView(in_features={self.in_features}, out_features={self.out_features}, bias=True)"


def split_qkv(state: Mapping[str, Tensor], keep: Container[str] = ()) -> dict[str, Tensor]:
    """``state`` with every ``<prefix>w_qkv.weight``/``.bias`` split into ``<prefix>w_q``, ``w_k``, ``w_v``.

    The names of unfused multi-head attention (three ``nn.Linear``), as in checkpoints written
    before the projections were fused and in learners' own modules. Entries whose name is in
    ``keep`` stay fused (e.g. ``keep=dict(other.named_parameters())`` matches ``other``'s names).

    Args:
        state: a state dict or ``dict(module.named_parameters())``.
        keep: names to leave as they are.

    Returns:
        A new dict; the split entries are views (row blocks) of the fused tensors.
    """
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        prefix, _, kind = name.rpartition("w_qkv.")
        if kind in ("weight", "bias") and name not in keep and (not prefix or prefix.endswith(".")):
            for part, block in zip(PROJECTIONS, tensor.chunk(3)):
                out[f"{prefix}{part}.{kind}"] = block
        else:
            out[name] = tensor
    return out


def fuse_qkv(state: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`split_qkv`: every complete ``<prefix>w_q``/``w_k``/``w_v`` triple stacked as ``w_qkv``.

    Reads checkpoints written before the projections were fused. Other entries, and a triple
    with a part missing or not a tensor, are kept as they are (and then reported by whoever
    checks the names).

    Returns:
        A new dict, in the original order (each fused entry where its ``w_q`` was).
    """
    out: dict[str, Any] = {}
    for name, value in state.items():
        prefix, _, rest = name.rpartition("w_")
        part, _, kind = rest.partition(".")
        if f"w_{part}" in PROJECTIONS and kind in ("weight", "bias") and (not prefix or prefix.endswith(".")):
            triple = [state.get(f"{prefix}{p}.{kind}") for p in PROJECTIONS]
            if all(isinstance(t, Tensor) for t in triple) and f"{prefix}w_qkv.{kind}" not in state:
                if part == "q":
                    out[f"{prefix}w_qkv.{kind}"] = torch.cat(triple)  # type: ignore[arg-type]
                continue
        out[name] = value
    return out


class MultiHeadAttention(nn.Module):
    """h attention heads over learned projections, concatenated and projected by W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,
    head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i).

    The h projections of each kind are one (D, D) matrix split into heads by a reshape, and
    the three kinds are stacked into one ``nn.Linear(d_model, 3 * d_model)``, ``w_qkv``:
    rows 0..D-1 are W_Q, D..2D-1 W_K, 2D..3D-1 W_V, the layout of
    ``nn.MultiheadAttention.in_proj_weight``. Self-attention (``query is key is value``) then
    projects Q, K and V in one matrix product, cross-attention (``key is value``) K and V in
    one. ``w_q``, ``w_k`` and ``w_v`` are views of the three blocks (:class:`ProjectionView`),
    and a state dict with separate ``w_q``/``w_k``/``w_v`` entries (an older checkpoint) loads.

    Args:
        d_model: model width D.
        n_heads: number of heads H; d_k = D / H.
        dropout: dropout on the attention weights.

    Shape:
        query (B, Tq, D), key and value (B, Tk, D); mask (B, 1, 1, Tk), (B, 1, Tq, Tk),
        (B, H, Tq, Tk), (1, 1, Tq, Tk) or (Tq, Tk), checked by
        :func:`~minitransformer.masks.check_mask` (a 3-D mask is refused).
        Returns output (B, Tq, D) and weights (B, H, Tq, Tk) or None.

    NaN or inf in the inputs is not checked and spreads to the output (see
    :func:`scaled_dot_product_attention`), with or without ``need_weights``: PyTorch's
    fused kernel alone can return a finite row for a NaN query, so the fused path adds
    ``0 * sum(q)`` to each query's output, which is 0 for a finite query and NaN otherwise.

    Inputs must be floating-point tensors of the weights' dtype (float32 by default; call
    ``.double()`` on the layer for float64), or any float dtype under autocast. The inputs
    and the mask are checked at every call unless ``checked=True`` says that the caller has
    done so (the :class:`~minitransformer.model.Transformer` checks once per forward pass).

    With a :class:`~minitransformer.cache.KVCache`, the keys and values of earlier steps
    are reused: a static (cross-attention) cache projects ``key``/``value`` once; a
    self-attention cache appends the new positions and attends over all of them.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={d_model} and n_heads={n_heads}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        # W_Q; W_K; W_V stacked: (3D, D), each block drawn as a separate nn.Linear(d_model, d_model)
        # would draw it, in that order, so that a seed gives the weights it gave three layers.
        parts = [nn.Linear(d_model, d_model) for _ in PROJECTIONS]
        self.w_qkv = nn.Linear(d_model, 3 * d_model, device="meta")  # the shape; the values come next
        self.w_qkv.weight = nn.Parameter(torch.cat([part.weight.detach() for part in parts]))
        self.w_qkv.bias = nn.Parameter(torch.cat([part.bias.detach() for part in parts]))
        self.w_o = nn.Linear(d_model, d_model)
        self.attn_dropout = nn.Dropout(dropout)

    @property
    def w_q(self) -> ProjectionView:
        """W_Q, rows 0..D-1 of ``w_qkv``."""
        return ProjectionView(self.w_qkv, 0, self.d_model)

    @property
    def w_k(self) -> ProjectionView:
        """W_K, rows D..2D-1 of ``w_qkv``."""
        return ProjectionView(self.w_qkv, 1, self.d_model)

    @property
    def w_v(self) -> ProjectionView:
        """W_V, rows 2D..3D-1 of ``w_qkv``."""
        return ProjectionView(self.w_qkv, 2, self.d_model)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # A checkpoint from before the fusion holds w_q, w_k, w_v: stack them as w_qkv.
        for kind in ("weight", "bias"):
            parts = [f"{prefix}{part}.{kind}" for part in PROJECTIONS]
            if f"{prefix}w_qkv.{kind}" not in state_dict and all(p in state_dict for p in parts):
                state_dict[f"{prefix}w_qkv.{kind}"] = torch.cat([state_dict.pop(p) for p in parts])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, H, T, Dk)."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, T, Dk)

    def split_fused_heads(self, x: Tensor, parts: int) -> tuple[Tensor, ...]:
        """(B, T, parts * D), e.g. Q, K, V side by side -> ``parts`` tensors (B, H, T, Dk) (views)."""
        return tuple(self.split_heads(part) for part in x.split(self.d_model, dim=-1))

    def merge_heads(self, x: Tensor) -> Tensor:
        """(B, H, T, Dk) -> (B, T, D): the concatenation of the heads."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)  # (B, T, D)

    def check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """Shapes and dtypes of ``forward``'s inputs; raises a one-line error for the first wrong one."""
        weights_dtype = self.w_qkv.weight.dtype
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
        d, weight, bias = self.d_model, self.w_qkv.weight, self.w_qkv.bias  # (3D, D), (3D,)
        cached = cache is not None and cache.static and cache.key is not None and cache.value is not None
        if query is key and key is value and not cached:  # self-attention: Q, K, V in one product
            q, k, v = self.split_fused_heads(F.linear(query, weight, bias), 3)  # 3 x (B, H, T, Dk)
        else:
            # One split (not three slices): its backward writes the gradient blocks into one (3D, D) tensor.
            (w_q, w_kv), (b_q, b_kv) = weight.split([d, 2 * d]), bias.split([d, 2 * d])
            q = self.split_heads(F.linear(query, w_q, b_q))  # (B, H, Tq, Dk)
            if cached:
                k, v = cache.key, cache.value  # (B, H, Tk, Dk), projected at the first step
            elif key is value:  # cross-attention: K and V in one product
                k, v = self.split_fused_heads(F.linear(key, w_kv, b_kv), 2)  # 2 x (B, H, Tk, Dk)
            else:
                k = self.split_heads(F.linear(key, w_kv[:d], b_kv[:d]))  # (B, H, Tk, Dk)
                v = self.split_heads(F.linear(value, w_kv[d:], b_kv[d:]))  # (B, H, Tk, Dk)
        if cache is not None and not cached:
            k, v = cache.update(k, v)  # (B, H, Tk_cached + Tk, Dk)
        if mask is not None and not checked:
            check_mask(mask, (q.size(0), self.n_heads, q.size(2), k.size(2)))
        weights: Tensor | None
        if need_weights:
            heads, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout=self.attn_dropout if self.training else None
            )
        else:
            heads = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
            )  # (B, H, Tq, Dk)
            heads = heads + 0.0 * q.sum(dim=-1, keepdim=True)  # NaN spreads from a query as in the unfused path
            weights = None
        return self.w_o(self.merge_heads(heads)), weights  # (B, Tq, D), (B, H, Tq, Tk) | None

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout={self.dropout}"
