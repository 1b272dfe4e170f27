"""The other two Transformer families, built from the same blocks (lesson 09).

The paper's model is an encoder-decoder. Keep one stack and you get the two families that
followed it:

* **encoder-only** (:class:`EncoderClassifier`, the BERT family): the encoder stack with its
  padding mask, every token sees every other; a head reads one pooled vector per sentence.
* **decoder-only** (:class:`DecoderOnlyLM`, the GPT family): a decoder without cross-attention,
  which is exactly an encoder layer under a causal mask; the head reads every position and
  predicts the next token. Its output projection is tied to the token embedding (section 3.4).

Nothing here re-implements a layer: both models are :class:`~minitransformer.layers.EncoderLayer`
stacks (:class:`~minitransformer.model.Encoder`) with :class:`TokenEmbedding`,
:class:`PositionalEncoding` and the masks of :mod:`minitransformer.masks`. Generation reuses the
key/value cache of :mod:`minitransformer.cache`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cache import DecoderCache
from .embeddings import PositionalEncoding, TokenEmbedding
from .masks import make_causal_mask, make_padding_mask
from .model import Encoder, xavier_init

__all__ = ["BagOfWordsClassifier", "DecoderOnlyLM", "EncoderClassifier", "masked_mean", "next_token_probabilities",
           "sample_next_token"]


def _check_ids(tokens: Tensor, name: str) -> None:
    if not isinstance(tokens, Tensor) or tokens.dim() != 2:
        shape = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise ValueError(f"{name} must be token ids of shape (B, T), got {shape}")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{name} must be an integer tensor of token ids, got dtype {tokens.dtype}")


def masked_mean(x: Tensor, keep: Tensor) -> Tensor:
    """Average the vectors of each sequence over its real (non-padding) positions.

    Args:
        x: hidden states (B, T, D).
        keep: bool (B, T), True for real tokens. Each row needs at least one True.

    Shape:
        Returns (B, D).
    """
    if keep.shape != x.shape[:2]:
        raise ValueError(f"keep must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(keep.shape)}")
    weights = keep.to(x.dtype)[..., None]  # (B, T, 1)
    count = weights.sum(dim=1).clamp(min=1.0)  # (B, 1): an all-padding row gives zeros, not NaN
    return (x * weights).sum(dim=1) / count  # (B, D)


class EncoderClassifier(nn.Module):
    """Encoder-only classifier: embed, encode with the padding mask, mean-pool, project to classes.

    Pooling: masked mean over the real tokens. A ``<cls>`` token (BERT) works as well, but its
    vector is only useful once training has taught that one position to gather the sentence;
    the mean hands the head every position from the first step, and leaving the padding out of
    both the attention (padding mask) and the mean makes the output independent of how much
    padding a batch adds.

    Args:
        vocab_size: number of token ids V.
        n_classes: number of classes C.
        d_model, n_heads, d_ff, n_layers, dropout, norm_first: as in the paper's encoder.
        max_len: longest input accepted.
        pad_id: the padding id; padding is hidden from attention and from the mean.

    Shape:
        tokens (B, T) ids; returns logits (B, C).
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
    """The baseline: logistic regression on word counts, blind to word order.

    logits = counts(tokens) W + b, with one weight row per token id, computed without building
    the (B, V) count matrix: the sum of the rows of ``weight`` picked by the tokens is the same
    product. Padding contributes nothing.

    Args:
        vocab_size: number of token ids V.
        n_classes: number of classes C.
        pad_id: the padding id.

    Shape:
        tokens (B, T) ids; returns logits (B, C).
    """

    def __init__(self, vocab_size: int, n_classes: int, pad_id: int = 0) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.weight = nn.Embedding(vocab_size, n_classes, padding_idx=pad_id)
        nn.init.zeros_(self.weight.weight)
        self.bias = nn.Parameter(torch.zeros(n_classes))

    def forward(self, tokens: Tensor) -> Tensor:
        _check_ids(tokens, "tokens")
        return self.weight(tokens).sum(dim=1) + self.bias  # (B, C)


class DecoderOnlyLM(nn.Module):
    """Decoder-only (GPT-style) language model: encoder layers under a causal mask, tied output layer.

    A decoder layer without its cross-attention is an encoder layer whose self-attention is
    causal, so the stack is an :class:`~minitransformer.model.Encoder` (``.decoder``) and every
    forward pass passes :func:`make_causal_mask`. The pre-softmax projection ``generator`` shares
    its (V, D) matrix with the token embedding.

    Args:
        vocab_size: number of token ids V.
        d_model, n_heads, d_ff, n_layers, dropout, norm_first: as in the paper.
        max_len: context length: the longest sequence one forward pass reads.

    Shape:
        tokens (B, T) with T <= max_len; returns logits (B, T, V), row t predicting token t + 1.
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
        """Final hidden states (B, T, D) and, with ``need_weights``, each layer's weights (B, H, T, T_all).

        With ``cache``, ``tokens`` are the positions not seen yet: they sit after the cached
        ones, attend to them, and are appended to the cache.
        """
        _check_ids(tokens, "tokens")
        offset = cache.length if cache is not None else 0
        length = tokens.size(1)
        if offset + length > self.max_len:
            raise ValueError(f"tokens has {length} positions after {offset} cached ones but max_len={self.max_len}: "
                             f"expected at most {self.max_len} in all; shorten the input or build the model with "
                             "a larger max_len")
        if length == 1 and offset > 0:
            mask = None  # one new query may see every cached key
        else:
            # New position i sits at offset + i and may see keys 0 .. offset + i.
            mask = make_causal_mask(offset + length, device=tokens.device)[..., offset:, :]  # (1, 1, T, offset + T)
        x = self.positional(self.embed(tokens), offset=offset)  # (B, T, D)
        maps = []
        for i, layer in enumerate(self.decoder.layers):
            layer_cache = cache.layers[i].self_attn if cache is not None else None
            x, weights = layer.forward_with_weights(x, mask, need_weights=need_weights, cache=layer_cache)
            if weights is not None:
                maps.append(weights)
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        if cache is not None:
            cache.length += length
        return x, maps

    def forward(self, tokens: Tensor, cache: DecoderCache | None = None) -> Tensor:
        return self.generator(self.hidden_states(tokens, cache)[0])  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, tokens: Tensor) -> list[Tensor]:
        """Each layer's causal self-attention weights, a list of N tensors (B, H, T, T)."""
        return self.hidden_states(tokens, need_weights=True)[1]

    @torch.no_grad()
    def generate(self, prompt_ids: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int | None = None, use_cache: bool = True) -> Tensor:
        """Continue ``prompt_ids`` by sampling one token at a time.

        Each step samples from :func:`next_token_probabilities` of the last position.
        With ``use_cache`` only the newest token goes through the model at each step; the keys and
        values of the earlier ones come from the cache. Once the text is longer than ``max_len``
        the model reads the last ``max_len`` tokens: every position then shifts by one at each
        step, so the cache cannot be reused and the window is recomputed (both paths give the
        same tokens).

        Args:
            prompt_ids: (T,) or (B, T) token ids, 1 <= T <= max_len.
            max_new_tokens: how many tokens to add.
            temperature: divides the logits; 0 picks the most likely token (greedy).
            top_k: sample among the k most likely tokens only (None: all V).
            seed: seeds a private generator, so the same call gives the same text; None uses
                PyTorch's global generator.
            use_cache: False recomputes the whole prefix at every step (slower, same result).

        Returns:
            The prompt followed by the new tokens, (T + max_new_tokens,) or (B, T + max_new_tokens).
        """
        if not isinstance(prompt_ids, Tensor) or prompt_ids.dim() not in (1, 2):
            got = tuple(prompt_ids.shape) if isinstance(prompt_ids, Tensor) else type(prompt_ids).__name__
            raise ValueError(f"prompt_ids must be token ids of shape (T,) or (B, T), got {got}")
        squeeze = prompt_ids.dim() == 1
        ids = prompt_ids[None] if squeeze else prompt_ids  # (B, T)
        if ids.size(1) == 0:
            raise ValueError(f"prompt_ids is empty (shape {tuple(prompt_ids.shape)}): expected at least one "
                             "token id to continue from")
        if ids.size(1) > self.max_len:
            raise ValueError(f"prompt_ids has {ids.size(1)} tokens but the model's max_len is {self.max_len}: "
                             f"expected a prompt of at most {self.max_len} tokens")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        _check_sampling(temperature, top_k, self.vocab_size)
        generator = None
        if seed is not None:
            generator = torch.Generator(device=ids.device).manual_seed(seed)
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
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be None or an integer from 1 to the vocabulary size {vocab_size}, "
                         f"got {top_k!r}")


def next_token_probabilities(logits: Tensor, temperature: float = 1.0, top_k: int | None = None) -> Tensor:
    """The distribution generation samples from: top-k filtering, then softmax(logits / temperature).

    Temperature below 1 sharpens the distribution, above 1 flattens it; 0 is the limit, all the
    probability on the most likely token (the first one on a tie). Top-k keeps the k largest logits
    and gives every other token probability 0.

    Args:
        logits: (..., V) scores of the next token.
        temperature: >= 0.
        top_k: None (keep all) or 1 <= k <= V.

    Shape:
        Returns (..., V), each row summing to 1.
    """
    _check_sampling(temperature, top_k, logits.size(-1))
    logits = logits.float()
    if temperature == 0 or top_k == 1:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)  # (..., V)
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.softmax(logits / temperature, dim=-1)  # (..., V)


def sample_next_token(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                      generator: torch.Generator | None = None) -> Tensor:
    """Draw one token per row from :func:`next_token_probabilities`; temperature 0 or top_k 1 is argmax.

    Args:
        logits: (B, V).
        temperature, top_k: as in :func:`next_token_probabilities`.
        generator: random generator for the draw (None: the global one).

    Shape:
        Returns (B, 1) int64 ids.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (B, V), got {tuple(logits.shape)}")
    _check_sampling(temperature, top_k, logits.size(-1))
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    probs = next_token_probabilities(logits, temperature, top_k)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)
