"""Translation quality: exact match, sacreBLEU, and a batched translate helper (lessons 07 and 08).

BLEU follows the now usual practice (Post, 2018, "A Call for Clarity in Reporting BLEU
Scores"): sacreBLEU's ``corpus_bleu`` on detokenized, cased output against the raw
reference sentences, with its default 13a tokenization. The paper's figures were computed
on tokenized text with multi-bleu.perl and are not directly comparable.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .data import SharedTokenizer
from .decoding import beam_search, greedy_decode
from .model import Transformer

#: Greedy decoding may write this many tokens more than the source has (paper, section 6.1).
EXTRA_LENGTH = 50


def _check_pairs(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"expected one hypothesis per reference, got {len(hypotheses)} hypotheses and "
            f"{len(references)} references"
        )
    if not references:
        raise ValueError("expected at least one sentence to score, got none")


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses identical to their reference (after stripping outer spaces).

    Args:
        hypotheses: the model's sentences.
        references: the correct sentences, in the same order.

    Returns:
        A number in [0, 1].
    """
    _check_pairs(hypotheses, references)
    return sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (0-100) of detokenized, cased hypotheses against raw references (sacreBLEU).

    Args:
        hypotheses: the model's sentences, detokenized.
        references: one reference per hypothesis, untouched.

    Returns:
        sacreBLEU's corpus score, e.g. 35.2.
    """
    _check_pairs(hypotheses, references)
    import sacrebleu  # heavy import, only needed here

    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


METRICS = {"exact_match": exact_match, "bleu": bleu}


@torch.no_grad()
def translate_sentences(
    model: Transformer,
    tokenizer: SharedTokenizer,
    sentences: Sequence[str],
    device: torch.device | str | None = None,
    batch_size: int = 64,
    extra_length: int = EXTRA_LENGTH,
    beam_size: int = 1,
    alpha: float = 0.6,
) -> list[str]:
    """Translate sentences with greedy decoding or beam search, in batches of similar length.

    Each output has at most its source's length + ``extra_length`` tokens (and never more than
    the model's positional table allows), whatever the batch. The model is put in eval mode
    and left there.

    Args:
        model: a trained :class:`Transformer` (bare, not wrapped by DDP or compile).
        tokenizer: the tokenizer it was trained with.
        sentences: source sentences.
        device: where to run; default the model's device.
        batch_size: sentences decoded together.
        extra_length: output tokens allowed beyond the source length.
        beam_size: 1 for greedy decoding, more for beam search (paper: 4).
        alpha: length penalty of beam search (paper: 0.6).

    Returns:
        The detokenized translations, in the order of ``sentences``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if device is None:
        device = next(model.parameters()).device
    model.eval()
    encoded = tokenizer.encode_batch(list(sentences))  # source ids end with eos, as in training
    longest = model.config.max_len
    for k, ids in enumerate(encoded):
        if len(ids) > longest:
            raise ValueError(
                f"sentence {k} has {len(ids)} tokens but the model reads at most max_len={longest}"
            )
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[str] = [""] * len(encoded)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in chunk)
        src = torch.full((len(chunk), width), tokenizer.pad_id, dtype=torch.long)  # (B, S)
        for row, i in enumerate(chunk):
            src[row, : len(encoded[i])] = torch.tensor(encoded[i])
        max_len = min(width + extra_length, longest - 1)
        if beam_size == 1:
            ys = greedy_decode(model, src.to(device), max_len, tokenizer.bos_id, tokenizer.eos_id)  # (B, 1 + L)
        else:
            ys = beam_search(model, src.to(device), tokenizer.bos_id, tokenizer.eos_id, beam_size=beam_size,
                             alpha=alpha, max_extra_len=extra_length)  # (B, 1 + L)
        for row, ids in zip(chunk, ys.tolist()):
            # Each sentence's own limit, so the result does not depend on its batch-mates.
            out[row] = tokenizer.decode(ids[: 1 + min(len(encoded[row]) + extra_length, longest - 1)])
    return out
