"""The two families that keep one stack of the paper's model, built from the same blocks: lessons 09 and 09b.

Encoder-only (:class:`EncoderClassifier`, BERT's) and decoder-only (:class:`DecoderOnlyLM`, GPT's: a decoder
layer without cross-attention is an encoder layer under a causal mask). Nothing here re-implements a layer.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cache import DecoderCache
from .embeddings import PositionalEncoding, TokenEmbedding
from .masks import make_causal_mask, make_padding_mask
from .model import Encoder, xavier_init

def _check_ids(tokens: Tensor, name: str) -> None:
    if not isinstance(tokens, Tensor) or tokens.dim() != 2:
        shape = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise ValueError(f"{name} must be token ids of shape (B, T), got {shape}")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer tensor of token ids, got dtype {tokens.dtype}")


def masked_mean(x: Tensor, keep: Tensor) -> Tensor:
    """Hidden states (B, T, D) averaged over the positions where ``keep`` (B, T) is True: (B, D)."""
    if keep.shape != x.shape[:2]:
        raise ValueError(f"keep must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(keep.shape)}")
    weights = keep.to(x.dtype)[..., None]  # (B, T, 1)
    count = weights.sum(dim=1).clamp(min=1.0)  # (B, 1): an all-padding row gives zeros, not NaN
    return (x * weights).sum(dim=1) / count  # (B, D)


class EncoderClassifier(nn.Module):
    """Encoder-only classifier: tokens (B, T) -> logits (B, C). Lesson 09b.

    Unlike BERT's ``<cls>`` vector the mean of the real tokens reads every position from the first step; with
    the padding hidden from the attention and the mean, the output does not depend on how much a batch adds.
    """

    def __init__(self, vocab_size: int, n_classes: int, d_model: int = 64, n_heads: int = 4, d_ff: int = 128,
                 n_layers: int = 2, max_len: int = 128, dropout: float = 0.1, norm_first: bool = False,
                 pad_id: int = 0) -> None:
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes must be at least 2, got {n_classes}")
        self.pad_id = pad_id
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, norm_first)
        self.head = nn.Linear(d_model, n_classes)
        xavier_init(self)

    def encode(self, tokens: Tensor) -> Tensor:
        """Contextual vectors (B, T, D) of every token, padding hidden by the padding mask."""
        _check_ids(tokens, "tokens")
        return self.encoder(self.positional(self.embed(tokens)), make_padding_mask(tokens, self.pad_id))

    def forward(self, tokens: Tensor) -> Tensor:
        pooled = masked_mean(self.encode(tokens), tokens != self.pad_id)  # (B, D)
        return self.head(pooled)  # (B, C)


class BagOfWordsClassifier(nn.Module):
    """The baseline, blind to word order: logistic regression on word counts, (B, T) -> (B, C). Lesson 09b."""

    def __init__(self, vocab_size: int, n_classes: int, pad_id: int = 0) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.weight = nn.Embedding(vocab_size, n_classes, padding_idx=pad_id)
        nn.init.zeros_(self.weight.weight)
        self.bias = nn.Parameter(torch.zeros(n_classes))

    def forward(self, tokens: Tensor) -> Tensor:
        _check_ids(tokens, "tokens")
        return self.weight(tokens).sum(dim=1) + self.bias  # (B, C): counts(tokens) W + b, without the (B, V) counts


class DecoderOnlyLM(nn.Module):
    """Decoder-only (GPT-style) language model: tokens (B, T <= max_len) -> logits (B, T, V). Lesson 09.

    The stack ``decoder`` is an :class:`~minitransformer.model.Encoder` run under the causal mask; row t of
    the logits predicts token t + 1. ``generator`` shares the token embedding's (V, D) matrix (section 3.4).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, d_ff: int = 256, n_layers: int = 2,
                 max_len: int = 128, dropout: float = 0.1, norm_first: bool = False) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.decoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, norm_first)
        self.generator = nn.Linear(d_model, vocab_size, bias=False)
        xavier_init(self)
        self.generator.weight = self.embed.embedding.weight  # tied (section 3.4)

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache (only each layer's ``self_attn`` part is used)."""
        return DecoderCache(len(self.decoder.layers))

    def hidden_states(self, tokens: Tensor, cache: DecoderCache | None = None,
                      need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Final hidden states (B, T, D) and, with ``need_weights``, each layer's weights (B, H, T, cached + T).

        With ``cache`` ``tokens`` are the new positions: they follow the cached ones and attend to them.
        """
        _check_ids(tokens, "tokens")
        offset = cache.length if cache is not None else 0
        length = tokens.size(1)
        if offset + length > self.max_len:
            raise ValueError(f"tokens has {length} positions after {offset} cached ones but max_len={self.max_len}: "
                             f"expected at most {self.max_len} in all; shorten the input or raise max_len")
        mask = None  # one new query may see every cached key
        if length > 1 or offset == 0:  # new position i sits at offset + i and may see keys 0 .. offset + i
            mask = make_causal_mask(offset + length, device=tokens.device)[..., offset:, :]  # (1, 1, T, offset + T)
        x = self.positional(self.embed(tokens), offset=offset)  # (B, T, D)
        out = self.decoder(x, mask, cache, need_weights=need_weights)  # (B, T, D), or with the weights
        if cache is not None:
            cache.length += length
        return out if need_weights else (out, [])

    def forward(self, tokens: Tensor, cache: DecoderCache | None = None) -> Tensor:
        return self.generator(self.hidden_states(tokens, cache)[0])  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, tokens: Tensor) -> list[Tensor]:
        """Each layer's causal self-attention weights, a list of N tensors (B, H, T, T)."""
        return self.hidden_states(tokens, need_weights=True)[1]

    @torch.no_grad()
    def generate(self, prompt_ids: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int | None = None, use_cache: bool = True) -> Tensor:
        """``prompt_ids`` (T,) or (B, T) followed by ``max_new_tokens`` sampled ones (:func:`sample_next_token`).

        ``seed`` seeds a private generator (None: PyTorch's global one). Past ``max_len`` tokens the model reads
        the last ``max_len``; every position then shifts at each step, so the cache restarts with the window.
        """
        if not isinstance(prompt_ids, Tensor) or prompt_ids.dim() not in (1, 2):
            got = tuple(prompt_ids.shape) if isinstance(prompt_ids, Tensor) else type(prompt_ids).__name__
            raise ValueError(f"prompt_ids must be token ids of shape (T,) or (B, T), got {got}")
        squeeze = prompt_ids.dim() == 1
        ids = prompt_ids[None] if squeeze else prompt_ids  # (B, T)
        if ids.size(1) == 0:
            raise ValueError(f"prompt_ids is empty (shape {tuple(prompt_ids.shape)}): expected at least one token id")
        if ids.size(1) > self.max_len:
            raise ValueError(f"prompt_ids has {ids.size(1)} tokens but the model's max_len is {self.max_len}: "
                             f"expected a prompt of at most {self.max_len} tokens")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        _check_sampling(temperature, top_k, self.vocab_size)
        generator = torch.Generator(device=ids.device).manual_seed(seed) if seed is not None else None
        was_training = self.training
        self.eval()
        cache = self.new_cache() if use_cache else None
        pending = ids  # tokens not yet in the cache
        for _ in range(max_new_tokens):
            if cache is not None and cache.length + pending.size(1) <= self.max_len:
                logits = self(pending, cache)[:, -1]  # (B, V)
            else:
                window = ids[:, -self.max_len:]  # (B, <= max_len)
                cache = self.new_cache() if use_cache else None
                logits = self(window, cache)[:, -1]  # (B, V)
            next_id = sample_next_token(logits, temperature, top_k, generator)  # (B, 1)
            ids = torch.cat([ids, next_id], dim=1)  # (B, T + 1)
            pending = next_id
        self.train(was_training)
        return ids[0] if squeeze else ids


def _check_sampling(temperature: float, top_k: int | None, vocab_size: int) -> None:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be None or an integer from 1 to the vocabulary size {vocab_size}, got {top_k!r}")


def next_token_probabilities(logits: Tensor, temperature: float = 1.0, top_k: int | None = None) -> Tensor:
    """softmax(logits / temperature) over the ``top_k`` largest logits (None: all), (..., V) -> (..., V). Lesson 09."""
    _check_sampling(temperature, top_k, logits.size(-1))
    logits = logits.float()
    if temperature == 0 or top_k == 1:  # the limit: all the probability on the first most likely token
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)  # (..., V)
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.softmax(logits / temperature, dim=-1)  # (..., V)


def sample_next_token(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                      generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of ``logits`` (B, V), drawn from :func:`next_token_probabilities`: (B, 1)."""
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    _check_sampling(temperature, top_k, logits.size(-1))
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    probs = next_token_probabilities(logits, temperature, top_k)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)
