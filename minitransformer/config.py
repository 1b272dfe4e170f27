"""The model's hyper-parameters in one frozen, validated dataclass.

The field names follow the paper (Vaswani et al., 2017, section 3 and Table 3)
and PyTorch's ``nn.Transformer`` so that a config reads like the paper's table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from collections.abc import Mapping
from typing import Any

#: Kinds of position information (``TransformerConfig.positional``).
POSITIONALS = ("sinusoidal", "learned", "none")
#: Initialisations of the token embedding tables (``TransformerConfig.embedding_init``).
EMBEDDING_INITS = ("xavier", "normal")


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer.

    Args:
        src_vocab_size: number of source token ids.
        tgt_vocab_size: number of target token ids.
        d_model: width of every residual stream vector (paper: 512).
        n_heads: attention heads h; each head has d_k = d_model / h (paper: 8).
        d_ff: inner width of the position-wise feed-forward network (paper: 2048).
        n_encoder_layers: N for the encoder stack (paper: 6).
        n_decoder_layers: N for the decoder stack (paper: 6).
        dropout: P_drop on sub-layer outputs and embedding sums (paper: 0.1).
        max_len: longest sequence the positional encoding table covers.
        pad_id: token id of padding, masked out of attention and the loss.
        norm_first: False is the paper's post-LN ``LayerNorm(x + Sublayer(x))``;
            True is pre-LN ``x + Sublayer(LayerNorm(x))``, a departure from the paper.
        tie_embeddings: share one matrix between the source embedding, the target
            embedding and the pre-softmax projection (paper, section 3.4). Needs
            one shared vocabulary, so both sizes must be equal.
        positional: how positions enter the model: "sinusoidal" (the paper, section 3.5),
            "learned" (one trained vector per position, the paper's Table 3 row E, a departure)
            or "none" (no position information at all: the encoder then sees a bag of tokens).
        scale_attention: divide the attention scores by sqrt(d_k) (the paper, section 3.2.1).
            False leaves them unscaled (``scale=1.0`` of ``F.scaled_dot_product_attention``), an
            ablation (lesson 10).
        d_qk: width of each head's queries and keys when it should differ from
            d_model / n_heads (Table 3 row B shrinks d_k at fixed h and d_v); None: d_model / n_heads.
        embedding_init: how the token embedding tables start: "normal" (the default: entries
            N(0, 1 / d_model), so a token vector times sqrt(d_model) has entries of spread 1, the
            size of the sinusoid's, as the paper's reference code, tensor2tensor, draws them) or
            "xavier" (Xavier-uniform like every other matrix: entries of spread
            sqrt(2 / (V + d_model)), so with a vocabulary of thousands a scaled token vector starts
            several times smaller than the sinusoid, and the positions drown the words early in
            training). The paper does not say; lesson 10 measures the difference.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    max_len: int = 512
    pad_id: int = 0
    norm_first: bool = False
    tie_embeddings: bool = False
    positional: str = "sinusoidal"
    scale_attention: bool = True
    d_qk: int | None = None
    embedding_init: str = "normal"

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
                raise TypeError(
                    f"TransformerConfig.{name} must be a bool (True or False), got {type(value).__name__} {value!r}"
                )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise TypeError(
                f"TransformerConfig.dropout must be a float, got {type(self.dropout).__name__} {self.dropout!r}"
            )
        if self.positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {self.positional!r}")
        if self.embedding_init not in EMBEDDING_INITS:
            raise ValueError(f"embedding_init must be one of {EMBEDDING_INITS}, got {self.embedding_init!r}")
        if self.d_qk is not None and (isinstance(self.d_qk, bool) or not isinstance(self.d_qk, int)
                                      or self.d_qk < 1):
            raise ValueError(f"d_qk must be None (d_model / n_heads) or a positive int, got {self.d_qk!r}")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model must be divisible by n_heads so that every head gets d_k = d_model / n_heads "
                f"features, got d_model={self.d_model} and n_heads={self.n_heads}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(
                f"pad_id must be a token id of both vocabularies, in [0, "
                f"{min(self.src_vocab_size, self.tgt_vocab_size)}), got {self.pad_id}"
            )
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "tie_embeddings shares one matrix between source and target embeddings, so it needs one "
                f"shared vocabulary, got src_vocab_size={self.src_vocab_size} and "
                f"tgt_vocab_size={self.tgt_vocab_size}"
            )

    @property
    def d_k(self) -> int:
        """Width of one attention head (d_k = d_v = d_model / h)."""
        return self.d_model // self.n_heads

    def weight_counts(self) -> dict[str, int]:
        """Numbers of weights (approximately: biases and LayerNorms left out), by what sets them.

        Returns:
            ``{"vocabulary": ..., "positions": ..., "layers": ...}``: the embedding and output
            matrices, the positional table (a buffer), the two stacks.
        """
        d = self.d_model
        tables = 1 if self.tie_embeddings else 3
        vocabulary = d * max(self.src_vocab_size, self.tgt_vocab_size) * tables
        layers = (self.n_encoder_layers * (4 * d * d + 2 * d * self.d_ff)
                  + self.n_decoder_layers * (8 * d * d + 2 * d * self.d_ff))
        return {"vocabulary": vocabulary, "positions": self.max_len * d, "layers": layers}

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, safe to store in a checkpoint and load with ``weights_only=True``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TransformerConfig":
        """Inverse of :meth:`to_dict`.

        Args:
            values: a mapping of field names to values, as written by :meth:`to_dict`.

        Raises:
            TypeError: ``values`` is not a mapping, or a value has the wrong type.
            ValueError: an unknown field, a missing required field, or a bad value.
        """
        if not isinstance(values, Mapping):
            raise TypeError(
                "TransformerConfig.from_dict expects a mapping of field names to values (as written by to_dict), "
                f"got {type(values).__name__} {values!r:.60}"
            )
        fields = cls.__dataclass_fields__
        unknown = [str(key) for key in values if key not in fields]
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields {sorted(unknown)}; known fields: {sorted(fields)}")
        missing = [name for name in ("src_vocab_size", "tgt_vocab_size") if name not in values]
        if missing:
            raise ValueError(f"TransformerConfig.from_dict is missing required fields {missing}")
        return cls(**values)

    def replace(self, **changes: Any) -> "TransformerConfig":
        """A copy with some fields changed (and validated again)."""
        return replace(self, **changes)

    # Presets -----------------------------------------------------------------
    @classmethod
    def base(cls, vocab_size: int, **overrides: Any) -> "TransformerConfig":
        """The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1, shared vocabulary."""
        values: dict[str, Any] = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=512,
                                      n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6,
                                      dropout=0.1, tie_embeddings=True)
        return cls(**{**values, **overrides})

    @classmethod
    def big(cls, vocab_size: int, **overrides: Any) -> "TransformerConfig":
        """The paper's big model (Table 3): N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3, shared vocabulary."""
        values: dict[str, Any] = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=1024,
                                      n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6,
                                      dropout=0.3, tie_embeddings=True)
        return cls(**{**values, **overrides})

    @classmethod
    def small(cls, vocab_size: int, **overrides: Any) -> "TransformerConfig":
        """A translator sized for a laptop CPU (not in the paper): N=3, d_model=256, d_ff=1024, h=4, P_drop=0.1.

        The base model's proportions (d_ff = 4 d_model, d_k = 64) at half the width and half the
        depth: about 9M weights with an 8,000-token shared vocabulary, the size of the best-known
        small Multi30k Transformers. ``train --dataset multi30k`` uses it on a machine without a
        CUDA GPU.
        """
        values: dict[str, Any] = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=256,
                                      n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3,
                                      dropout=0.1, tie_embeddings=True)
        return cls(**{**values, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int, **overrides: Any) -> "TransformerConfig":
        """A small model that trains in seconds to minutes on a laptop CPU (not in the paper)."""
        values: dict[str, Any] = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=64,
                                      n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2,
                                      dropout=0.1, tie_embeddings=True)
        return cls(**{**values, **overrides})
