"""Turning a trained model into sequences: greedy decoding (lesson 06) and beam search (lesson 08).

Both feed the decoder the newest token and keep the rest in a key/value cache (``use_cache=False`` recomputes
all, for checking); the causal mask alone hides the generated prefix, which is never padding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .cache import DecoderCache
from .config import TransformerConfig
from .masks import check_mask, make_causal_mask, make_padding_mask
from .model import Transformer
from .utils import check_int, check_memory


def _next_logits(model: Transformer, ys: Tensor, memory: Tensor, src_mask: Tensor,
                 cache: DecoderCache | None, banned: Tensor) -> Tensor:
    """Logits (B, V) for the token after ``ys`` (B, t), with the ``banned`` ids set to -inf."""
    if cache is None:
        causal = make_causal_mask(ys.size(1), device=ys.device)  # (1, 1, t, t): a generated token is never padding
        hidden = model.decode(ys, memory, src_mask, tgt_mask=causal)  # (B, t, D)
    else:
        hidden = model.decode(ys[:, cache.length:], memory, src_mask, cache=cache)  # (B, 1, D): the newest token
    logits = model.generator(hidden[:, -1]).float()  # (B, V)
    if banned.numel():
        logits[:, banned] = float("-inf")
    return logits


def _encode(model: Transformer, src: Tensor, src_mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The memory and the source mask (default: padding), which must serve one query at a time: (B, 1 or H, 1, S)."""
    if src_mask is None:
        src_mask = make_padding_mask(src, model.config.pad_id)  # (B, 1, 1, S)
    memory = model.encode(src, src_mask)  # (B, S, D)
    check_mask(src_mask, (src.size(0), model.config.n_heads, 1, src.size(1)), name="src_mask")
    return memory, src_mask


def _prepare(model: Transformer, src: Tensor, bos_id: int, eos_id: int | None, banned_ids: Sequence[int] | None,
             max_len: int | None) -> Tensor:
    """Check what both searches share; return the banned ids as a tensor on ``src``'s device."""
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a minitransformer Transformer, got {type(model).__name__}")
    if not isinstance(src, Tensor) or src.dim() != 2:
        shape = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
        raise ValueError(f"src must be token ids of shape (B, S), got shape {shape}")
    vocab, pad_id = model.config.tgt_vocab_size, model.config.pad_id
    empty = (src == pad_id).all(dim=1).nonzero().flatten().tolist() if src.numel() else []
    if empty or src.size(1) == 0:
        rows = ", ".join(map(str, empty[:5])) + (" ..." if len(empty) > 5 else "") if empty else "every row"
        raise ValueError(f"src row(s) {rows} hold only padding (pad_id={pad_id}): there is no source to translate; "
                         "leave such rows out of the batch")
    in_vocab = f" (a token id of the target vocabulary, tgt_vocab_size={vocab})"
    check_int(bos_id, "bos_id", 0, below=vocab, why=in_vocab)
    if eos_id is not None:
        check_int(eos_id, "eos_id", 0, below=vocab, why=in_vocab)
    if bos_id == pad_id:
        raise ValueError(f"bos_id={bos_id} is also the model's pad id: the start token would be hidden as padding "
                         "wherever the target's padding mask is used (teacher forcing in training), so its first "
                         "position would attend to nothing. Give the start token its own id")
    if banned_ids is None:
        banned = [pad_id, bos_id]
    else:
        if isinstance(banned_ids, (str, bytes)) or not isinstance(banned_ids, Sequence):
            raise TypeError(f"banned_ids must be a sequence of token ids or None, got {type(banned_ids).__name__}")
        banned = [check_int(i, "each of banned_ids", 0, below=vocab, why=in_vocab) for i in banned_ids]
        if eos_id is not None and eos_id in banned:
            raise ValueError(f"eos_id={eos_id} is in banned_ids {list(banned_ids)}: no sentence could ever end")
        if len(set(banned)) >= vocab:
            raise ValueError(f"banned_ids bans all {vocab} token ids: nothing is left to generate")
    if max_len is not None:  # the decoder reads up to max_len positions
        check_int(max_len, "max_len", 1)
        if max_len > model.config.max_len:
            raise ValueError(f"max_len={max_len} is longer than the model's positional table (config.max_len="
                             f"{model.config.max_len}): generating {max_len} tokens feeds the decoder {max_len} "
                             f"positions; pass max_len <= {model.config.max_len}")
    return torch.tensor(sorted(set(banned)), dtype=torch.long, device=src.device)


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int | None,
                  src_mask: Tensor | None = None, use_cache: bool = True,
                  banned_ids: Sequence[int] | None = None) -> Tensor:
    """The most likely next token at each step, for a whole batch: ids (B, 1 + L) from ``bos_id``. Lesson 06.

    Each sentence stops at its ``eos_id`` (None: after ``max_len`` tokens) and is padded after it. ``banned_ids``
    are never generated, by default the pad id and ``bos_id`` (a copy task passes ``[pad_id]``). Eval mode first.
    """
    banned = _prepare(model, src, bos_id, eos_id, banned_ids, check_int(max_len, "max_len", 1))
    pad_id = model.config.pad_id
    memory, src_mask = _encode(model, src, src_mask)  # (B, S, D), (B, 1, 1, S)
    cache = model.new_cache() if use_cache else None
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (B,)
    for _ in range(max_len):
        next_token = _next_logits(model, ys, memory, src_mask, cache, banned).argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(finished, pad_id)  # nothing finishes without an end token
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t + 1)
        if eos_id is not None:
            finished |= next_token == eos_id
            if bool(finished.all()):
                break
    return ys


def length_penalty(length: Tensor | int, alpha: float) -> Tensor:
    """lp(Y) = ((5 + |Y|) / 6) ** alpha, the length normalisation of Wu et al. (2016) used by the paper."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a float, got {type(alpha).__name__} {alpha!r}")
    if not math.isfinite(alpha) or alpha < 0:  # a NaN would make every score NaN
        raise ValueError(f"alpha, the length penalty exponent, must be a finite number >= 0 (paper: 0.6), got {alpha}")
    return ((5.0 + torch.as_tensor(length, dtype=torch.float32)) / 6.0) ** alpha


def beam_memory(config: TransformerConfig, rows: int, src_len: int, out_len: int) -> int:
    """Bytes (float32) that beam search over ``rows`` = sentences x hypotheses takes at most."""
    d, layers = config.d_model, config.n_decoder_layers
    # The memory and the cross-attention keys and values (S positions), the self-attention cache and the scores.
    per_row = d * src_len * (1 + 2 * layers) + 2 * layers * d * out_len + 4 * config.tgt_vocab_size
    return 4 * rows * per_row


@torch.no_grad()
def beam_search(model: Transformer, src: Tensor, bos_id: int, eos_id: int | None, beam_size: int = 4,
                alpha: float = 0.6, max_extra_len: int = 50, max_len: int | None = None,
                src_mask: Tensor | None = None, use_cache: bool = True,
                banned_ids: Sequence[int] | None = None,
                on_finished: Callable[[int, Tensor, float, float, bool], None] | None = None) -> Tensor:
    """Beam search with length penalty, batched over sentences and beams (paper, section 6.1). Lesson 08.

    A sentence is done with ``beam_size`` hypotheses ended by ``eos_id``, scored log P(Y) / lp(Y), or at its
    maximum length (source + ``max_extra_len``, or ``max_len``); returns each one's best, (B, 1 + L), padded.
    ``on_finished(sentence, ids, log_prob, score, ended)`` sees every finished hypothesis, in the order found.
    """
    banned = _prepare(model, src, bos_id, eos_id, banned_ids, max_len)
    check_int(beam_size, "beam_size", 1)
    check_int(max_extra_len, "max_extra_len", 0)
    length_penalty(1, alpha)  # checks alpha before the first step
    # No more hypotheses than tokens: each step ranks beam x vocabulary candidates anyway.
    beam_size = min(beam_size, model.config.tgt_vocab_size)
    pad_id = model.config.pad_id
    lengths = (src != pad_id).sum(dim=1)  # (B,)
    limits = torch.full_like(lengths, max_len) if max_len is not None else lengths + max_extra_len  # (B,)
    limits = limits.clamp(min=1, max=model.config.max_len)  # the decoder reads at most the positional table
    longest = int(limits.max())
    batch, k, device = src.size(0), beam_size, src.device
    check_memory(beam_memory(model.config, batch * k, src.size(1), longest),
                 f"beam_size={k} for {batch} sentence(s) of up to {src.size(1)} tokens", device)

    memory, src_mask = _encode(model, src, src_mask)  # (B, S, D), (B, 1, 1, S)
    memory = memory.repeat_interleave(k, dim=0)  # (B*K, S, D)
    src_mask = src_mask.repeat_interleave(k, dim=0)  # (B*K, 1, 1, S)
    cache = model.new_cache() if use_cache else None
    ys = torch.full((batch * k, 1), bos_id, dtype=torch.long, device=device)  # (B*K, 1)
    # Only the first beam is live at the start, so the first step does not pick K copies.
    scores = torch.full((batch, k), float("-inf"), device=device)  # (B, K)
    scores[:, 0] = 0.0
    best_score = torch.full((batch,), float("-inf"), device=device)  # (B,)
    best_tokens = torch.full((batch, longest + 1), pad_id, dtype=torch.long, device=device)  # (B, 1 + L)
    best_length = torch.ones(batch, dtype=torch.long, device=device)  # (B,)
    n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (B,)
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,)
    rows = torch.arange(batch, device=device)

    for step in range(longest):
        log_probs = torch.log_softmax(_next_logits(model, ys, memory, src_mask, cache, banned), dim=-1)  # (B*K, V)
        vocab = log_probs.size(-1)
        candidates = (scores[:, :, None] + log_probs.view(batch, k, vocab)).view(batch, k * vocab)  # (B, K*V)
        # 2K candidates hold at least K that do not end, since each beam adds one end token at most.
        top_scores, top_index = candidates.topk(min(2 * k, k * vocab), dim=-1)  # (B, 2K)
        beam_of = top_index // vocab  # (B, 2K)
        token_of = top_index % vocab  # (B, 2K)
        is_end = token_of == (eos_id if eos_id is not None else -1)  # (B, 2K); ids are >= 0, so -1 never ends
        rank = torch.arange(top_index.size(1), device=device)[None]  # (1, 2K)
        at_limit = (step + 1 >= limits)[:, None]  # (B, 1)

        # Finished hypotheses: end tokens among the best K; at the length limit, every live one.
        finishing = (is_end & (rank < k)) | (at_limit & (rank < k))  # (B, 2K)
        finishing &= ~done[:, None] & torch.isfinite(top_scores)
        normalised = torch.where(finishing, top_scores / length_penalty(step + 1, alpha),
                                 torch.tensor(float("-inf"), device=device))  # (B, 2K)
        if on_finished is not None:
            for b, j in finishing.nonzero().tolist():
                ids = torch.cat([ys[b * k + beam_of[b, j]], token_of[b, j].view(1)])  # (step + 2,)
                on_finished(b, ids, float(top_scores[b, j]), float(normalised[b, j]), bool(is_end[b, j]))
        step_best, step_arg = normalised.max(dim=-1)  # (B,)
        improved = step_best > best_score  # (B,)
        if bool(improved.any()):
            parent = rows * k + beam_of[rows, step_arg]  # (B,)
            new_row = torch.cat([ys[parent], token_of[rows, step_arg][:, None]], dim=1)  # (B, step + 2)
            best_tokens[improved, : step + 2] = new_row[improved]
            best_tokens[improved, step + 2:] = pad_id
            best_score = torch.where(improved, step_best, best_score)
            best_length = torch.where(improved, torch.full_like(best_length, step + 2), best_length)
        n_finished += finishing.sum(dim=-1)
        done |= (n_finished >= k) | at_limit[:, 0]
        if bool(done.all()):
            break

        # Live hypotheses: the best K candidates that do not end.
        order = torch.argsort(is_end.float() * top_index.size(1) + rank, dim=-1)[:, :k]  # (B, K)
        scores = top_scores.gather(1, order)  # (B, K)
        parent = (rows[:, None] * k + beam_of.gather(1, order)).view(-1)  # (B*K,)
        ys = torch.cat([ys[parent], token_of.gather(1, order).view(-1, 1)], dim=1)  # (B*K, step + 2)
        if cache is not None:
            cache.reorder(parent)

    return best_tokens[:, : int(best_length.max())]  # trim the columns no sentence used
