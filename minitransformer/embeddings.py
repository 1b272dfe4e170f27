"""Token embeddings and the sinusoidal positional encoding (paper, sections 3.4 and 3.5).

Taught in lessons 01 (embeddings) and 02 (positional encoding).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .layers import dropped


def sinusoidal_positional_encoding(max_len: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The table of fixed position vectors of section 3.5.

    PE(pos, 2i)   = sin(pos / base^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / base^(2i / d_model))

    Args:
        max_len: number of positions (rows).
        d_model: vector width (columns); must be even so sines and cosines pair up.
        base: the wavelength base, 10000 in the paper.

    Shape:
        Returns (max_len, d_model), float32.
    """
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}")
    if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even integer (sine and cosine columns pair up), got {d_model!r}")
    if base <= 1:
        raise ValueError(f"base must be greater than 1, got {base!r}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    # One frequency per (sin, cos) pair; float64 keeps large positions accurate.
    inv_freq = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d_model/2,)
    angles = position * inv_freq  # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal position vectors to a batch of embeddings, then applies dropout.

    Args:
        d_model: vector width.
        max_len: longest sequence accepted.
        dropout: dropout probability on the sum (paper: 0.1).
        base: wavelength base of the encoding.

    Shape:
        Input (B, T, D) with T + offset <= max_len; output (B, T, D).
    """

    pe: Tensor

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1, base: float = 10000.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        # Not persistent: the table is recomputed from the config, so checkpoints stay small.
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model, base), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Add PE(offset .. offset + T - 1) to ``x``; ``offset`` is used when decoding one token at a time."""
        if x.dim() != 3 or x.size(-1) != self.d_model:
            raise ValueError(f"expected input of shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        length = x.size(1)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence of length {offset + length} is longer than max_len={self.max_len} of the positional "
                "encoding; build the model with a larger max_len or shorten the input"
            )
        return dropped(self.dropout, x + self.pe[offset:offset + length].to(x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEmbedding(nn.Module):
    """Adds one trained vector per position, then applies dropout (Table 3 row E, a departure).

    The table is an ``nn.Embedding(max_len, d_model)`` in ``.embedding``; unlike the
    sinusoid it has weights, and it knows no position beyond ``max_len`` or beyond
    the longest sentence it was trained on.

    Args:
        d_model: vector width.
        max_len: number of positions with a vector.
        dropout: dropout probability on the sum.

    Shape:
        Input (B, T, D) with T + offset <= max_len; output (B, T, D).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Add the vectors of positions offset .. offset + T - 1 to ``x``."""
        _check_positions(x, offset, self.d_model, self.max_len)
        positions = torch.arange(offset, offset + x.size(1), device=x.device)  # (T,)
        return dropped(self.dropout, x + self.embedding(positions).to(x.dtype))  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, learned"


class NoPositionalEncoding(nn.Module):
    """Adds nothing: only the dropout of the other encodings (an ablation; lesson 10).

    Without position information self-attention is permutation-equivariant, so the encoder
    sees its input as a bag of tokens; only the decoder's causal mask still tells order apart.

    Shape:
        Input (B, T, D); output (B, T, D).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_positions(x, offset, self.d_model, self.max_len)
        return dropped(self.dropout, x)  # (B, T, D)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, no positions"


def _check_positions(x: Tensor, offset: int, d_model: int, max_len: int) -> None:
    if x.dim() != 3 or x.size(-1) != d_model:
        raise ValueError(f"expected input of shape (B, T, {d_model}), got {tuple(x.shape)}")
    if offset + x.size(1) > max_len:
        raise ValueError(
            f"sequence of length {offset + x.size(1)} is longer than max_len={max_len} of the positional "
            "encoding; build the model with a larger max_len or shorten the input"
        )


def make_positional(kind: str, d_model: int, max_len: int = 512, dropout: float = 0.1) -> nn.Module:
    """The position module of ``TransformerConfig.positional``.

    Args:
        kind: "sinusoidal" (:class:`PositionalEncoding`), "learned"
            (:class:`LearnedPositionalEmbedding`) or "none" (:class:`NoPositionalEncoding`).
        d_model: vector width.
        max_len: longest sequence accepted.
        dropout: dropout probability on the sum.

    Returns:
        A module called as ``positional(x, offset=0)`` on (B, T, D) embeddings.
    """
    kinds = {"sinusoidal": PositionalEncoding, "learned": LearnedPositionalEmbedding, "none": NoPositionalEncoding}
    if kind not in kinds:
        raise ValueError(f"positional must be one of {tuple(kinds)}, got {kind!r}")
    return kinds[kind](d_model, max_len, dropout)


class TokenEmbedding(nn.Module):
    """Looks up one learned vector per token id and multiplies it by sqrt(d_model) (section 3.4).

    Args:
        vocab_size: number of token ids V.
        d_model: vector width D.

    Shape:
        Input (B, T) integer ids; output (B, T, D).
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        """The (V, D) table, shared with the output projection when embeddings are tied."""
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"token ids must be an integer tensor (int64), got dtype {tokens.dtype}")
        return self.embedding(tokens) * self.scale  # (B, T, D)
