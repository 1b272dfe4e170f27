"""The encoder, the decoder and the whole encoder-decoder Transformer (paper, section 3 and Figure 1).

Taught in lessons 05 (encoder stack) and 06 (decoder, full forward pass).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .cache import DecoderCache
from .config import TransformerConfig
from .embeddings import TokenEmbedding, make_positional
from .layers import DecoderLayer, EncoderLayer, LayerNorm
from .masks import check_mask, make_padding_mask, make_target_mask
from .utils import check_memory


class Encoder(nn.Module):
    """A stack of N encoder layers in ``.layers``.

    A final LayerNorm (``.norm``) exists only with ``norm_first=True``: pre-LN leaves the
    residual stream unnormalised, the paper's post-LN already ends every layer with one.

    Shape:
        x (B, S, D) (embedded source), src_mask broadcastable to (B, H, S, S); output (B, S, D).
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, scaled, d_qk) for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, src_mask: Tensor | None = None, checked: bool = False) -> Tensor:
        return self.forward_with_weights(x, src_mask, need_weights=False, checked=checked)[0]

    def forward_with_weights(self, x: Tensor, src_mask: Tensor | None = None,
                             need_weights: bool = True, checked: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Also returns each layer's self-attention weights, a list of N tensors (B, H, S, S).

        ``checked=True``: ``x`` and ``src_mask`` were checked by the caller, so the layers skip it.
        """
        maps = []
        for layer in self.layers:
            x, weights = layer.forward_with_weights(x, src_mask, need_weights=need_weights, checked=checked)
            if weights is not None:
                maps.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        return x, maps


class Decoder(nn.Module):
    """A stack of N decoder layers in ``.layers``, with a final LayerNorm only for pre-LN.

    Shape:
        x (B, T, D) (embedded target), memory (B, S, D); output (B, T, D).
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, scaled: bool = True, d_qk: int | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, scaled, d_qk) for _ in range(n_layers)
        )
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, cache: DecoderCache | None = None,
                checked: bool = False) -> Tensor:
        return self.forward_with_weights(x, memory, src_mask, tgt_mask, need_weights=False, cache=cache,
                                         checked=checked)[0]

    def forward_with_weights(
        self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
        need_weights: bool = True, cache: DecoderCache | None = None, checked: bool = False,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Also returns per-layer self-attention (B, H, T, T) and cross-attention (B, H, T, S) weights.

        ``checked=True``: the inputs and masks were checked by the caller, so the layers skip it.
        """
        if cache is not None and len(cache.layers) != len(self.layers):
            raise ValueError(f"cache has {len(cache.layers)} layers but the decoder has {len(self.layers)}")
        self_maps, cross_maps = [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            x, self_w, cross_w = layer.forward_with_weights(x, memory, src_mask, tgt_mask, need_weights, layer_cache,
                                                            checked)
            if self_w is not None and cross_w is not None:
                self_maps.append(self_w)
                cross_maps.append(cross_w)
        if self.norm is not None:
            x = self.norm(x)
        return x, self_maps, cross_maps


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform for every weight matrix of ``module``, biases 0 (LayerNorm's gamma 1 stays).

    The initialisation of :class:`Transformer` and of the models of :mod:`minitransformer.variants`.
    """
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
    counts = c.weight_counts()
    blame = {"vocabulary": f"vocabulary size {max(c.src_vocab_size, c.tgt_vocab_size):,} x d_model={c.d_model:,}",
             "positions": f"max_len={c.max_len:,} x d_model={c.d_model:,}",
             "layers": f"d_model={c.d_model:,}, d_ff={c.d_ff:,} and {c.n_encoder_layers}+{c.n_decoder_layers} layers"}
    check_memory(4 * sum(counts.values()), f"a Transformer with {blame[max(counts, key=counts.get)]} (its weights)",
                 device)


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    ``src_embed`` and ``tgt_embed`` (token embedding x sqrt(d_model)) feed one shared
    ``positional`` encoding (sinusoidal, learned or none, as ``config.positional`` says); ``encoder`` and ``decoder`` are the two stacks; ``generator``
    is the pre-softmax linear projection to the target vocabulary. With
    ``config.tie_embeddings`` the three share one (V, D) matrix (section 3.4).

    Args:
        config: the sizes; see :class:`TransformerConfig`.

    Shape:
        src (B, S) and tgt (B, T) token ids; ``forward`` returns logits (B, T, V).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        self.config = config
        c = config
        _check_fits(c)
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model)
        self.positional = make_positional(c.positional, c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder(c.n_encoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.scale_attention, c.d_qk)
        self.decoder = Decoder(c.n_decoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                               c.scale_attention, c.d_qk)
        self.generator = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.reset_parameters()
        if c.tie_embeddings:
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.weight = self.src_embed.embedding.weight

    def reset_parameters(self) -> None:
        """Xavier-uniform for every weight matrix; biases 0, LayerNorm gamma 1 and beta 0.

        With ``config.embedding_init == "normal"`` (the default) the two token embedding tables
        are then drawn from N(0, 1 / d_model) instead (the output layer too when it is tied to
        them), so that ``embedding * sqrt(d_model)`` has entries of spread 1, like the sinusoid.
        """
        xavier_init(self)
        if self.config.embedding_init == "normal":
            for embed in (self.src_embed, self.tgt_embed):
                nn.init.normal_(embed.embedding.weight, mean=0.0, std=self.config.d_model ** -0.5)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Number of parameters, a shared (tied) matrix counted once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def _check_tokens(self, tokens: Tensor, name: str, vocab_size: int) -> None:
        """Token ids must be a non-empty (B, L) integer tensor with every id in [0, vocab_size)."""
        letter = name[0].upper()
        if not isinstance(tokens, Tensor):
            raise TypeError(f"{name} must be a tensor of token ids of shape (B, {letter}), got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise ValueError(f"{name} must be token ids of shape (B, {letter}), got shape {tuple(tokens.shape)}")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an integer tensor of token ids, got dtype {tokens.dtype}")
        if tokens.size(1) == 0:
            need = "at least the start token" if name == "tgt" else "at least one token"
            raise ValueError(f"{name} is empty, shape {tuple(tokens.shape)}: every sentence needs {need} ({letter} >= 1)")
        # The id check is one reduction, and on a GPU one synchronisation, per call. It is left
        # out while training on an accelerator (two stalls per step; the batches come from the
        # package's tokenizer) and under torch.compile (a data-dependent branch splits the graph).
        on_cpu_or_eval = tokens.device.type == "cpu" or not self.training
        if tokens.numel() and on_cpu_or_eval and not torch.compiler.is_compiling():
            low, high = torch.stack(torch.aminmax(tokens)).tolist()
            if low < 0 or high >= vocab_size:
                bad = low if low < 0 else high
                kind = "src_vocab_size" if name == "src" else "tgt_vocab_size"
                raise ValueError(
                    f"{name} holds token id {bad}, but {kind} is {vocab_size}: token ids must be in [0, {vocab_size})"
                )

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

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Run the encoder: (B, S) ids -> memory (B, S, D).

        Args:
            src: source token ids (B, S), S >= 1, ids in [0, src_vocab_size).
            src_mask: encoder self-attention mask, (B, 1, 1, S) or (B, 1, S, S);
                defaults to the padding mask of ``src``.

        Returns:
            memory (B, S, D).
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        batch, length = src.shape
        if src_mask is None:
            src_mask = make_padding_mask(src, self.config.pad_id)
        check_mask(src_mask, (batch, self.config.n_heads, length, length), name="src_mask")
        # Checked once here for all layers: the embeddings give (B, S, D) in the weights' dtype.
        return self.encoder(self.positional(self.src_embed(src)), src_mask, checked=True)  # (B, S, D)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               tgt_mask: Tensor | None = None, cache: DecoderCache | None = None,
               memory_mask: Tensor | None = None, checked: bool = False) -> Tensor:
        """Run the decoder: (B, T) ids and memory (B, S, D) -> hidden states (B, T, D).

        Apply ``generator`` to the result for logits. With ``cache`` (see :meth:`new_cache`),
        ``tgt`` holds only the positions not seen yet; they attend to the cached ones and
        the cache grows by T.

        Args:
            tgt: target token ids (B, T), T >= 1, ids in [0, tgt_vocab_size).
            memory: the encoder's output (B, S, D).
            src_mask: the source padding mask (B, 1, 1, S) that ``encode`` used, applied in
                cross-attention. It has no default (the decoder never sees ``src``): leave it
                out and padded source positions get attended to.
            tgt_mask: self-attention mask (B, 1, T, T); defaults to padding & causal, or with
                a cache to causal over the cached and new positions.
            cache: key/value cache for incremental decoding.
            memory_mask: a cross-attention mask instead of ``src_mask``, e.g. one row per
                target position (B, 1, T, S) or per head (B, H, T, S), as ``nn.Transformer``'s
                ``memory_mask``; it must hide the source padding itself. Pass one of the two.
            checked: the caller has checked ``tgt``, ``memory`` and the masks, so they are not
                checked again: the searches of :mod:`~minitransformer.decoding` check
                everything once before the first step and then feed back the ids they picked
                (a step of one token is short enough that the checks were a tenth of its time).

        Returns:
            Hidden states (B, T, D).
        """
        if not checked:
            self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
            self._check_memory(memory, tgt.size(0))
        if memory_mask is not None and src_mask is not None:
            raise ValueError("pass either src_mask (a padding mask) or memory_mask for cross-attention, not both: "
                             "memory_mask replaces src_mask and must hide the source padding itself")
        cross_name, cross_mask = ("memory_mask", memory_mask) if memory_mask is not None else ("src_mask", src_mask)
        batch, length = tgt.shape
        offset = cache.length if cache is not None else 0
        if cross_mask is not None and not checked:
            check_mask(cross_mask, (batch, self.config.n_heads, length, memory.size(1)), name=cross_name)
        if tgt_mask is None:
            if cache is None:
                tgt_mask = make_target_mask(tgt, self.config.pad_id)
            elif length > 1:
                # New position i sits at offset + i and may see keys 0 .. offset + i.
                tgt_mask = torch.ones(length, offset + length, dtype=torch.bool, device=tgt.device)
                tgt_mask = tgt_mask.tril(diagonal=offset)[None, None]  # (1, 1, T, offset + T)
        if tgt_mask is not None and not checked:
            check_mask(tgt_mask, (batch, self.config.n_heads, length, offset + length), name="tgt_mask")
        x = self.positional(self.tgt_embed(tgt), offset=offset)  # (B, T, D)
        out = self.decoder(x, memory, cross_mask, tgt_mask, cache=cache, checked=True)  # (B, T, D), checked here
        if cache is not None:
            cache.length += length
        return out

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for incremental decoding with :meth:`decode`."""
        return DecoderCache(len(self.decoder.layers))

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None) -> Tensor:
        """Logits (B, T, V) for the next token at every target position (teacher forcing).

        Args:
            src: source token ids (B, S), S >= 1.
            tgt: decoder input ids (B, T), T >= 1, starting with the start token.
            src_mask: encoder self-attention mask, (B, 1, 1, S) or (B, 1, S, S); defaults
                to the padding mask of ``src``.
            tgt_mask: decoder self-attention mask (B, 1, T, T); defaults to padding & causal.
            memory_mask: cross-attention mask, (B, 1, T, S) or (B, H, T, S), as in
                ``nn.Transformer``. Defaults to ``src_mask`` when that is a padding mask
                (one row for all queries, (B, 1, 1, S)); a per-query ``src_mask``
                (B, 1, S, S) cannot serve the T target queries, so pass ``memory_mask`` then.

        Returns:
            Logits (B, T, V).

        Empty sequences raise a ``ValueError``, and so do token ids outside the vocabulary
        (checked on the CPU and in eval mode; not while training on a GPU, where the check
        would stall every step, nor under ``torch.compile``). NaN or inf never comes from
        valid ids with finite weights, and is not checked for.
        """
        if isinstance(src, Tensor) and isinstance(tgt, Tensor) and src.dim() == tgt.dim() == 2 \
                and src.size(0) != tgt.size(0):
            raise ValueError(f"src and tgt must have the same batch size, got {src.size(0)} and {tgt.size(0)}")
        if src_mask is None and isinstance(src, Tensor) and src.dim() == 2:
            src_mask = make_padding_mask(src, self.config.pad_id)
        memory = self.encode(src, src_mask)  # checks src and src_mask
        if memory_mask is None:
            if isinstance(src_mask, Tensor) and src_mask.dim() >= 2 and src_mask.size(-2) != 1:
                raise ValueError(
                    f"src_mask has shape {tuple(src_mask.shape)}, one row per source position, so it cannot "
                    f"mask the cross-attention of the {tgt.size(1)} target positions: pass memory_mask "
                    "(B, 1, T, S) as well, or a padding mask (B, 1, 1, S) as src_mask"
                )
            return self.generator(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T, V)
        return self.generator(self.decode(tgt, memory, None, tgt_mask, memory_mask=memory_mask))  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt: Tensor) -> dict[str, list[Tensor]]:
        """Every attention weight of one teacher-forced pass, for plotting.

        Returns:
            ``{"encoder": [...], "decoder_self": [...], "cross": [...]}``, one tensor per layer:
            (B, H, S, S), (B, H, T, T) and (B, H, T, S).
        """
        self._check_tokens(src, "src", self.config.src_vocab_size)
        self._check_tokens(tgt, "tgt", self.config.tgt_vocab_size)
        src_mask = make_padding_mask(src, self.config.pad_id)
        memory, enc_maps = self.encoder.forward_with_weights(self.positional(self.src_embed(src)), src_mask)
        tgt_mask = make_target_mask(tgt, self.config.pad_id)
        _, self_maps, cross_maps = self.decoder.forward_with_weights(
            self.positional(self.tgt_embed(tgt)), memory, src_mask, tgt_mask
        )
        return {"encoder": enc_maps, "decoder_self": self_maps, "cross": cross_maps}
