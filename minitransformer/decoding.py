"""Turning a trained model into output sequences: greedy decoding (lesson 06).

The decoder is autoregressive: it predicts token t+1 from the source and tokens 0..t,
so at inference the output is built one token at a time.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .masks import make_padding_mask
from .model import Transformer


@torch.no_grad()
def greedy_decode(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int,
                  src_mask: Tensor | None = None) -> Tensor:
    """Pick the most likely next token at each step, for a whole batch at once.

    Each sentence stops at its own end token; positions after it are filled with the
    model's pad id. The loop ends when every sentence has finished or after ``max_len``
    new tokens.

    Args:
        model: a :class:`Transformer` (put it in eval mode first to switch dropout off).
        src: source ids, (B, S).
        max_len: most tokens to generate after the start token.
        bos_id: start token, fed as the first decoder input.
        eos_id: end token.
        src_mask: defaults to the padding mask of ``src``.

    Returns:
        Token ids (B, 1 + L), L <= max_len, beginning with ``bos_id``.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    pad_id = model.config.pad_id
    if src_mask is None:
        src_mask = make_padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)  # (B, S, D)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (B,)
    for _ in range(max_len):
        hidden = model.decode(ys, memory, src_mask)  # (B, t, D)
        next_token = model.generator(hidden[:, -1]).argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(finished, pad_id)
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # (B, t + 1)
        finished |= next_token == eos_id
        if bool(finished.all()):
            break
    return ys
