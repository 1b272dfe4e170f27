"""Token embeddings and position information (paper, sections 3.4 and 3.5): lessons 01, 02 and 10."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoidal_positional_encoding(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The fixed (max_len, d_model) float32 table of position vectors of section 3.5. Lesson 02."""
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even integer (sine and cosine columns pair up), got {d_model!r}")
    if base <= 1:
        raise ValueError(f"base must be greater than 1, got {base!r}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1); float64 keeps far positions exact
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,): 1 / base^(2i/d)
    angles = position * inv_freq  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)  # PE(pos, 2i) = sin(pos / base^(2i / d_model))
    pe[:, 1::2] = torch.cos(angles)  # PE(pos, 2i+1) = cos(pos / base^(2i / d_model))
    return pe.float()


def _check_length(offset: int, length: int, max_len: int) -> None:
    # What only the table knows: how many positions it has (an index past it would fail obscurely).
    if offset + length > max_len:
        raise ValueError(f"sequence of length {offset + length} is longer than max_len={max_len} of the positional "
                         "encoding; build the model with a larger max_len or shorten the input")


class PositionalEncoding(nn.Module):
    """Adds the sinusoid's rows ``offset`` .. ``offset + T - 1`` to (B, T, D) embeddings, then dropout. Lesson 02."""

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1, base: float = 10000.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        # Not persistent: recomputed from the config, so checkpoints stay small.
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_length(offset, x.size(1), self.max_len)
        # offset > 0 when decoding one token at a time: the new token sits at position offset.
        return self.dropout(x + self.pe[offset:offset + x.size(1)].to(x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEmbedding(nn.Module):
    """Adds one trained vector per position (``.embedding``), then dropout: Table 3 row E, a departure. Lesson 10."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_length(offset, x.size(1), self.max_len)
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return self.dropout(x + self.embedding(positions).to(x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, learned"


class NoPositionalEncoding(nn.Module):
    """No position information, only the dropout: the encoder then sees a bag of tokens (an ablation). Lesson 10."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_length(offset, x.size(1), self.max_len)
        return self.dropout(x)  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, no positions"


def make_positional(kind: str, d_model: int, max_len: int = 512, dropout: float = 0.1) -> nn.Module:
    """The module of ``TransformerConfig.positional``: "sinusoidal", "learned" or "none", called as ``(x, offset)``."""
    kinds = {"sinusoidal": PositionalEncoding, "learned": LearnedPositionalEmbedding, "none": NoPositionalEncoding}
    if kind not in kinds:
        raise ValueError(f"positional must be one of {tuple(kinds)}, got {kind!r}")
    return kinds[kind](d_model, max_len, dropout)


class TokenEmbedding(nn.Module):
    """Token ids (B, T) -> learned vectors times sqrt(d_model), (B, T, D) (section 3.4). Lesson 01."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        """The (V, D) table, shared with the output layer when embeddings are tied."""
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * self.scale  # (B, T, D)
