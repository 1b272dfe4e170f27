"""The encoder, the decoder and the encoder-decoder Transformer (paper, section 3 and Figure 1): lessons 05 and 06.

``Transformer``'s methods check their inputs once per call; a layer inside checks only what it alone can see.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cache import DecoderCache
from .config import TransformerConfig
from .embeddings import TokenEmbedding, make_positional
from .layers import DecoderLayer, EncoderLayer, LayerNorm
from .masks import check_mask, make_causal_mask, make_padding_mask, make_target_mask
from .utils import check_memory


class Encoder(nn.Module):
    """N encoder layers (``.layers``), and a final LayerNorm (``.norm``) only for pre-LN. Lesson 05.

    (B, S, D) -> (B, S, D), or ``(output, [weights (B, H, S, S) per layer])``; ``cache``: lesson 09's decoder-only LM.
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None,
                 inner_dropout: float | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, scaled, d_qk,
                                                 inner_dropout) for _ in range(n_layers))
        # Post-LN ends every layer with a LayerNorm already; pre-LN leaves the residual stream unnormalised.
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, src_mask: Tensor | None = None, cache: DecoderCache | None = None,
                need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor]]:
        maps = []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i].self_attn if cache is not None else None
            if need_weights:
                x, weights = layer(x, src_mask, layer_cache, need_weights=True)
                maps.append(weights)
            else:
                x = layer(x, src_mask, layer_cache)  # (B, S, D)
        if self.norm is not None:
            x = self.norm(x)
        return (x, maps) if need_weights else x


class Decoder(nn.Module):
    """N decoder layers (``.layers``), and a final LayerNorm only for pre-LN. Lesson 06.

    (B, T, D) and memory (B, S, D) -> (B, T, D), or ``(output, self weights, cross weights)`` with
    ``need_weights``: per layer (B, H, T, T) and (B, H, T, S).
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None,
                 inner_dropout: float | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, scaled, d_qk,
                                                 inner_dropout) for _ in range(n_layers))
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                cache: DecoderCache | None = None,
                need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor], list[Tensor]]:
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            if need_weights:
                x, self_weights, cross_weights = layer(x, memory, src_mask, tgt_mask, layer_cache, need_weights=True)
                self_maps.append(self_weights)
                cross_maps.append(cross_weights)
            else:
                x = layer(x, memory, src_mask, tgt_mask, layer_cache)  # (B, T, D)
        if self.norm is not None:
            x = self.norm(x)
        return (x, self_maps, cross_maps) if need_weights else x


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform for every weight matrix of ``module``, biases 0; LayerNorm's gamma stays 1."""
    for name, p in module.named_parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        elif name.endswith("bias"):
            nn.init.zeros_(p)


def _check_fits(c: TransformerConfig) -> None:
    """Refuse, before allocating, a model whose float32 weights alone exceed the memory (not on "meta")."""
    device = torch.get_default_device()
    if device.type == "meta":
        return
    d, vocab = c.d_model, max(c.src_vocab_size, c.tgt_vocab_size)
    counts = {  # weights (biases and LayerNorms left out), by the setting that makes them many
        f"vocabulary size {vocab:,} x d_model={d:,}": d * vocab * (1 if c.tie_embeddings else 3),
        f"max_len={c.max_len:,} x d_model={d:,}": c.max_len * d,
        f"d_model={d:,}, d_ff={c.d_ff:,} and {c.n_encoder_layers}+{c.n_decoder_layers} layers":
            c.n_encoder_layers * (4 * d * d + 2 * d * c.d_ff) + c.n_decoder_layers * (8 * d * d + 2 * d * c.d_ff),
    }
    check_memory(4 * sum(counts.values()), f"a Transformer with {max(counts, key=counts.get)} (its weights)", device)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need" (Figure 1): logits (B, T, V). Lesson 06.

    ``generator`` is the pre-softmax linear layer; with ``config.tie_embeddings`` it shares one (V, D) matrix with
    ``src_embed`` and ``tgt_embed`` (section 3.4).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = c = config
        _check_fits(c)
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model)
        self.positional = make_positional(c.positional, c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder(c.n_encoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.scale_attention, c.d_qk, c.inner_dropout)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.scale_attention, c.d_qk, c.inner_dropout)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.reset_parameters()
        if c.tie_embeddings:
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.weight = self.src_embed.embedding.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform matrices, then with ``embedding_init="normal"`` token tables drawn from N(0, 1 / d_model)."""
        xavier_init(self)
        if self.config.embedding_init == "normal":
            for embed in (self.src_embed, self.tgt_embed):  # x sqrt(d_model): entries of spread 1, as the sinusoid's
                nn.init.normal_(embed.embedding.weight, mean=0.0, std=self.config.d_model ** -0.5)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Number of parameters, a shared (tied) matrix counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids (B, S) -> memory (B, S, D); ``src_mask`` defaults to the padding mask of ``src``."""
        self._check_tokens(src, "src", self.config.src_vocab_size)
        batch, length = src.shape
        if src_mask is None:
            src_mask = make_padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        check_mask(src_mask, (batch, self.config.n_heads, length, length), name="src_mask")
        return self.encoder(self.positional(self.src_embed(src)), src_mask)  # (B, S, D)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
               cache: DecoderCache | None = None, memory_mask: Tensor | None = None) -> Tensor:
        """Target ids (B, T) and memory (B, S, D) -> hidden states (B, T, D); ``generator`` makes them logits.

        ``src_mask`` (B, 1, 1, S) has no default (the decoder never sees ``src``); ``memory_mask`` (B, 1 or H, T, S)
        replaces it. With ``cache`` (:meth:`new_cache`) ``tgt`` holds only the new positions (lesson 08).
        """
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        self._check_memory(memory, tgt.size(0))
        if memory_mask is not None and src_mask is not None:
            raise ValueError("pass either src_mask (a padding mask) or memory_mask for cross-attention, not both: "
                             "memory_mask replaces src_mask and must hide the source padding itself")
        if cache is not None and len(cache.layers) != len(self.decoder.layers):
            raise ValueError(f"cache has {len(cache.layers)} layers but the decoder has {len(self.decoder.layers)}")
        cross_name, cross_mask = ("memory_mask", memory_mask) if memory_mask is not None else ("src_mask", src_mask)
        batch, length = tgt.shape
        offset = cache.length if cache is not None else 0
        if cross_mask is not None:
            check_mask(cross_mask, (batch, self.config.n_heads, length, memory.size(1)), name=cross_name)
        if tgt_mask is None and cache is None:
            tgt_mask = make_target_mask(tgt, self.config.pad_id)  # (B, 1, T, T): padding & causal
        elif tgt_mask is None and length > 1:  # new position i sits at offset + i: keys 0 .. offset + i
            tgt_mask = make_causal_mask(offset + length, device=tgt.device)[..., offset:, :]  # (1, 1, T, offset + T)
        if tgt_mask is not None:
            check_mask(tgt_mask, (batch, self.config.n_heads, length, offset + length), name="tgt_mask")
        x = self.positional(self.tgt_embed(tgt), offset=offset)  # (B, T, D)
        out = self.decoder(x, memory, cross_mask, tgt_mask, cache=cache)  # (B, T, D)
        if cache is not None:
            cache.length += length
        return out

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return DecoderCache(len(self.decoder.layers))

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None) -> Tensor:
        """Logits (B, T, V) for the next token at every target position (teacher forcing).

        ``src_mask`` (default: padding) serves the cross-attention too, unless ``memory_mask`` (B, 1, T, S) is given.
        """
        if isinstance(src, Tensor) and isinstance(tgt, Tensor) and src.dim() == tgt.dim() == 2 \
                and src.size(0) != tgt.size(0):
            raise ValueError(f"src and tgt must have the same batch size, got {src.size(0)} and {tgt.size(0)}")
        if src_mask is None and isinstance(src, Tensor) and src.dim() == 2:
            src_mask = make_padding_mask(src, self.config.pad_id)  # (B, 1, 1, S)
        memory = self.encode(src, src_mask)  # (B, S, D)
        if memory_mask is not None:
            return self.generator(self.decode(tgt, memory, None, tgt_mask, memory_mask=memory_mask))  # (B, T, V)
        if isinstance(src_mask, Tensor) and src_mask.dim() >= 2 and src_mask.size(-2) != 1:
            raise ValueError(f"src_mask has shape {tuple(src_mask.shape)}, one row per source position, so it cannot "
                             f"mask the cross-attention of the {tgt.size(1)} target positions: pass memory_mask "
                             "(B, 1, T, S) as well, or a padding mask (B, 1, 1, S) as src_mask")
        return self.generator(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt: Tensor) -> dict[str, list[Tensor]]:
        """Every attention weight of one teacher-forced pass, for plotting (lesson 06).

        Returns ``{"encoder": [...], "decoder_self": [...], "cross": [...]}``, one tensor per layer:
        (B, H, S, S), (B, H, T, T) and (B, H, T, S).
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        src_mask = make_padding_mask(src, self.config.pad_id)
        memory, enc_maps = self.encoder(self.positional(self.src_embed(src)), src_mask, need_weights=True)
        tgt_mask = make_target_mask(tgt, self.config.pad_id)
        _, self_maps, cross_maps = self.decoder(self.positional(self.tgt_embed(tgt)), memory, src_mask, tgt_mask,
                                                need_weights=True)
        return {"encoder": enc_maps, "decoder_self": self_maps, "cross": cross_maps}

    # The checks of the public methods above, once per call.
    def _check_tokens(self, tokens: Tensor, name: str, vocab_size: int) -> None:
        letter = name[0].upper()
        if not isinstance(tokens, Tensor):
            raise TypeError(f"{name} must be a tensor of token ids of shape (B, {letter}), got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise ValueError(f"{name} must be token ids of shape (B, {letter}), got shape {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an integer tensor of token ids, got dtype {tokens.dtype}")
        if tokens.size(1) == 0:
            need = "at least the start token" if name == "tgt" else "at least one token"
            raise ValueError(f"{name} is empty, shape {tuple(tokens.shape)}: every sentence needs {need} "
                             f"({letter} >= 1)")
        # The id range costs a reduction and, on a GPU, a synchronisation: skipped while training on an
        # accelerator (two stalls per step) and under torch.compile (a data-dependent branch splits the graph).
        if tokens.numel() and (tokens.device.type == "cpu" or not self.training) and not torch.compiler.is_compiling():
            low, high = torch.stack(torch.aminmax(tokens)).tolist()
            if low < 0 or high >= vocab_size:
                kind = "src_vocab_size" if name == "src" else "tgt_vocab_size"
                raise ValueError(f"{name} holds token id {low if low < 0 else high}, but {kind} is {vocab_size}: "
                                 f"token ids must be in [0, {vocab_size})")

    def _check_memory(self, memory: Tensor, batch: int) -> None:
        if not isinstance(memory, Tensor) or memory.dim() != 3 or memory.size(-1) != self.config.d_model:
            shape = tuple(memory.shape) if isinstance(memory, Tensor) else type(memory).__name__
            raise ValueError(f"memory must be the encoder's output of shape (B, S, {self.config.d_model}), got {shape}")
        if memory.size(0) != batch:
            raise ValueError(f"memory is for {memory.size(0)} sentences but tgt has B = {batch}")
        dtype = self.generator.weight.dtype
        autocast = torch.is_autocast_enabled(memory.device.type)
        if not memory.is_floating_point() or (memory.dtype != dtype and not autocast):
            raise TypeError(f"memory must be the encoder's output, a floating-point tensor of the model's dtype "
                            f"{dtype}, got dtype {memory.dtype}")
