"""Key/value caches for incremental decoding, passed by argument (no module holds decoding state): lesson 08.

At step t the keys and values of tokens 0..t-1 are the previous step's, and the cross-attention's depend only on
the memory: kept, they make each new token the work of one position instead of t.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class KVCache:
    """Keys and values (B, H, Tk, Dk) of one attention; ``static``: cross-attention's, computed once. Lesson 08."""

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
        """Keep batch rows ``index``, in that order: beam search follows its surviving hypotheses."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)


@dataclass
class LayerCache:
    """The two caches of one decoder layer. Lesson 08."""

    self_attn: KVCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=lambda: KVCache(static=True))


@dataclass
class DecoderCache:
    """One :class:`LayerCache` per decoder layer; ``length``: positions done, the next one's offset. Lesson 08."""

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
