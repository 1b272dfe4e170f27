"""A sentence classification task for the encoder-only classifier of lesson 09b: is the word order real?

Both classes hold the same words, so only the order (seen through the positional encoding) tells them
apart. Sentences are reduced to :func:`plain_words` first: with their punctuation, "original iff the last
word ends with '.'" scored 92.8% on Multi30k's validation captions. Without Multi30k on disk the sentences
are long dates.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .dates import load_dates
from .multi30k import fetch_multi30k, load_multi30k

ORIGINAL, SHUFFLED = 1, 0


@dataclass(frozen=True)
class WordOrderData:
    """Labelled sentences and where they came from."""

    sentences: list[str]
    labels: list[int]
    source: str


def plain_words(sentence: str) -> list[str]:
    """The words of a sentence, lowercase, without the punctuation at their ends.

    ``"A man, in a hat."`` gives ``["a", "man", "in", "a", "hat"]``; a piece that is only
    punctuation disappears. Inner characters stay (``"t-shirt"``, ``"man's"``).
    """
    stripped = (w.strip(string.punctuation) for w in sentence.lower().split())
    return [w for w in stripped if w]


def shuffle_word_order(sentences: list[str], seed: int = 0, min_words: int = 3) -> tuple[list[str], list[int]]:
    """Label each sentence 1 (kept) or 0 (its words shuffled), half and half at random.

    Every sentence is reduced to its :func:`plain_words` first, in both classes, so that neither
    punctuation (the final ".") nor capitals mark where the original sentence ends or starts.
    """
    rng = random.Random(seed)
    out, labels = [], []
    for sentence in sentences:
        words = plain_words(sentence)
        if len(words) < min_words or len(set(words)) < 2:
            continue
        if rng.random() < 0.5:
            out.append(" ".join(words))
            labels.append(ORIGINAL)
            continue
        shuffled = words[:]
        while shuffled == words:
            rng.shuffle(shuffled)
        out.append(" ".join(shuffled))
        labels.append(SHUFFLED)
    return out, labels


def load_word_order(split: str = "train", data_dir: str | Path | None = None, limit: int | None = None,
                    seed: int = 0) -> WordOrderData:
    """The word-order task on one split, from Multi30k's English captions or, without them, from dates.

    Nothing is downloaded: Multi30k is used only when its files are already in ``data_dir``
    (default: ``$MINITRANSFORMER_MULTI30K_DIR``, else the user cache, see :func:`multi30k_dir`).
    """
    try:
        fetch_multi30k((split,), data_dir, download=False)
    except FileNotFoundError:
        pairs = load_dates(split, n_train=6_000, n_validation=500, n_test=500)
        sentences = [s for pair in pairs for s in pair]  # English and German dates
        source = "dates"
    else:
        sentences = [en for _, en in load_multi30k(split, data_dir, src_lang="de", tgt_lang="en", download=False)]
        source = "multi30k"
    if limit is not None:
        sentences = sentences[:limit]
    texts, labels = shuffle_word_order(sentences, seed=seed + {"train": 0, "validation": 1, "test": 2}[split])
    return WordOrderData(texts, labels, source)


def pad_sequences(sequences: list[list[int]], pad_id: int = 0, max_len: int | None = None) -> Tensor:
    """Right-pad lists of ids into one (B, T) int64 tensor, T the longest (cut to ``max_len``)."""
    if not sequences:
        raise ValueError("sequences is empty: expected at least one list of ids")
    rows = [s[:max_len] if max_len is not None else s for s in sequences]
    out = torch.full((len(rows), max(1, max(len(r) for r in rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return out  # (B, T)
