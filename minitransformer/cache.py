"""Key/value caches for incremental decoding (lesson 08).

When the decoder generates token t, the keys and values of tokens 0..t-1 in every
self-attention layer are the same as at the previous step, and the keys and values of
the cross-attention depend only on the encoder's output. Keeping them turns each new
token into the work of one position instead of t.

The caches are plain objects passed by argument: modules hold no decoding state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class KVCache:
    """Projected keys and values of one attention layer, split into heads.

    Args:
        static: True for cross-attention, whose keys and values are computed once from
            the encoder's output; False for self-attention, which appends the new
            positions at each step.

    Shape:
        key and value (B, H, Tk, Dk), or None before the first step.
    """

    static: bool = False
    key: Tensor | None = None
    value: Tensor | None = None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Store (static) or append (self-attention) new keys and values; return all of them."""
        if self.key is None or self.value is None or self.static:
            self.key, self.value = key, value
        else:
            self.key = torch.cat([self.key, key], dim=2)  # (B, H, Tk + T, Dk)
            self.value = torch.cat([self.value, value], dim=2)  # (B, H, Tk + T, Dk)
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (in that order): beam search follows the surviving beams."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


@dataclass
class LayerCache:
    """The two caches of one decoder layer."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=lambda: KVCache(static=True))


@dataclass
class DecoderCache:
    """Everything the decoder keeps between steps: one :class:`LayerCache` per layer.

    Args:
        n_layers: number of decoder layers.

    Attributes:
        length: number of target positions already processed (the position offset of
            the next token).
    """

    n_layers: int
    layers: list[LayerCache] = field(init=False)
    length: int = 0

    def __post_init__(self) -> None:
        self.layers = [LayerCache() for _ in range(self.n_layers)]

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` in every layer (beam search)."""
        for layer in self.layers:
            layer.self_attn.reorder(index)
            layer.cross_attn.reorder(index)
