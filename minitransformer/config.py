"""The model's hyper-parameters: one frozen dataclass, validated once (lesson 06).

Field names are the paper's (section 3, Table 3) and ``nn.Transformer``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import partialmethod
from typing import Any

POSITIONALS = ("sinusoidal", "learned", "none")
EMBEDDING_INITS = ("xavier", "normal")

# The presets, one row each as in the paper's Table 3, with one shared (tied) vocabulary; weights counted
# with the paper's 37,000 tokens (WMT14 EN-DE) unless said.
PRESETS: dict[str, tuple[int, int, int, int, float]] = {
    #          N  d_model   h  d_ff  P_drop
    "base":  (6,    512,   8, 2048,  0.1),  # Table 3, 63.1M weights (the paper: 65M)
    "big":   (6,   1024,  16, 4096,  0.3),  # Table 3, 214.2M (the paper: 213M)
    "small": (3,    256,   4, 1024,  0.1),  # a Multi30k translator for a CPU: 7.6M with 8,000 tokens
    "tiny":  (2,     64,   4,  256,  0.1),  # trains in minutes on a CPU: 0.3M with 1,000 tokens
}


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of the Transformer; the departures from the paper are lesson 10's ablations. Lesson 06."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512  # width of the residual stream
    n_heads: int = 8  # h; each head has d_k = d_model / h
    d_ff: int = 2048  # inner width of the feed-forward network (section 3.3)
    n_encoder_layers: int = 6  # N
    n_decoder_layers: int = 6
    dropout: float = 0.1  # P_drop, on sub-layer outputs and embedding sums (section 5.4)
    # Dropout on the attention weights and the feed-forward's hidden units, where nn.Transformer puts it too
    # (the paper names neither); None: P_drop. On a CPU these masks are most of dropout's cost.
    inner_dropout: float | None = None
    max_len: int = 512  # rows of the positional table: the longest sequence
    pad_id: int = 0  # hidden from attention and from the loss
    norm_first: bool = False  # False: the paper's post-LN, LayerNorm(x + Sublayer(x)); True: pre-LN
    tie_embeddings: bool = False  # one matrix for both embeddings and the output layer (section 3.4)
    positional: str = "sinusoidal"  # "sinusoidal" (section 3.5), "learned" (Table 3 row E) or "none"
    scale_attention: bool = True  # divide the scores by sqrt(d_k) (section 3.2.1)
    d_qk: int | None = None  # width of each head's queries and keys when not d_k (Table 3 row B)
    embedding_init: str = "normal"  # "normal": N(0, 1 / d_model) as tensor2tensor; "xavier"; the paper does not say

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff",
                     "n_encoder_layers", "n_decoder_layers", "max_len", "pad_id"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"TransformerConfig.{name} must be an int, got {type(value).__name__} {value!r}")
            if value < 1 and name != "pad_id":
                raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
        for name in ("norm_first", "tie_embeddings", "scale_attention"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"TransformerConfig.{name} must be a bool (True or False), "
                                f"got {type(value).__name__} {value!r}")
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise TypeError(f"TransformerConfig.dropout must be a float, got {type(self.dropout).__name__} "
                            f"{self.dropout!r}")
        if self.positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {self.positional!r}")
        if self.embedding_init not in EMBEDDING_INITS:
            raise ValueError(f"embedding_init must be one of {EMBEDDING_INITS}, got {self.embedding_init!r}")
        if self.d_qk is not None and (isinstance(self.d_qk, bool) or not isinstance(self.d_qk, int) or self.d_qk < 1):
            raise ValueError(f"d_qk must be None (d_model / n_heads) or a positive int, got {self.d_qk!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model must be divisible by n_heads so that every head gets d_k = d_model / n_heads "
                             f"features, got d_model={self.d_model} and n_heads={self.n_heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        inner = self.inner_dropout
        if inner is not None and (isinstance(inner, bool) or not isinstance(inner, (int, float)) or not 0 <= inner < 1):
            raise ValueError(f"inner_dropout must be None (the same as dropout) or in [0, 1), got {inner!r}")
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        if not 0 <= self.pad_id < vocab:
            raise ValueError(f"pad_id must be a token id of both vocabularies, in [0, {vocab}), got {self.pad_id}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("tie_embeddings shares one matrix between source and target embeddings, so it needs one "
                             f"shared vocabulary, got src_vocab_size={self.src_vocab_size} and "
                             f"tgt_vocab_size={self.tgt_vocab_size}")

    @property
    def d_k(self) -> int:
        """Width of one attention head, d_k = d_v = d_model / h."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, safe to store in a checkpoint and load with ``weights_only=True``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TransformerConfig:
        """Inverse of :meth:`to_dict`; unknown or missing fields are named in the error."""
        if not isinstance(values, Mapping):
            raise TypeError("TransformerConfig.from_dict expects a mapping of field names to values (as written by "
                            f"to_dict), got {type(values).__name__} {values!r:.60}")
        fields = cls.__dataclass_fields__
        unknown = [str(key) for key in values if key not in fields]
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields {sorted(unknown)}; known fields: {sorted(fields)}")
        missing = [name for name in ("src_vocab_size", "tgt_vocab_size") if name not in values]
        if missing:
            raise ValueError(f"TransformerConfig.from_dict is missing required fields {missing}")
        return cls(**values)

    def replace(self, **changes: Any) -> TransformerConfig:
        """A copy with some fields changed (and validated again)."""
        return replace(self, **changes)

    @classmethod
    def preset(cls, name: str, vocab_size: int, **overrides: Any) -> TransformerConfig:
        """The row ``name`` of ``PRESETS`` with one shared vocabulary of ``vocab_size`` tokens; ``overrides`` win."""
        n, d_model, n_heads, d_ff, dropout = PRESETS[name]
        return cls(**{"src_vocab_size": vocab_size, "tgt_vocab_size": vocab_size, "d_model": d_model,
                      "n_heads": n_heads, "d_ff": d_ff, "n_encoder_layers": n, "n_decoder_layers": n,
                      "dropout": dropout, "tie_embeddings": True, **overrides})

    # TransformerConfig.base(vocab_size, **overrides), and so on for each row.
    base = partialmethod(preset, "base")
    big = partialmethod(preset, "big")
    small = partialmethod(preset, "small")
    tiny = partialmethod(preset, "tiny")
