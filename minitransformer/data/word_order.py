"""A sentence classification task for the encoder-only classifier of lesson 09: is the word order real?

Half of the sentences keep their words in the order their author wrote them (label 1), the other
half have their words shuffled (label 0, never equal to the original). Both classes hold exactly
the same words, so a bag-of-words model cannot beat chance, by construction: the only signal is
the order, which an encoder sees through its positional encoding. It is a small cousin of the
grammatical-acceptability tasks that encoder models are tested on.

Every sentence, kept or shuffled, is first reduced to its :func:`plain_words` (lowercase, the
punctuation at the ends of words removed). Without that, the task has a shortcut that needs no
notion of order: 95.3% of the English captions of Multi30k's validation split end in a word
carrying ".", so "original iff the last word ends with '.'" scored 92.8% on that split, and a
capital first letter gives away the first word in the same way.

The sentences are the English captions of Multi30k (:func:`~minitransformer.data.load_multi30k`)
when their files are on disk; otherwise English and German long dates
(:func:`~minitransformer.data.load_dates`), which are always available.
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
    """Labelled sentences and where they came from.

    Attributes:
        sentences: the (possibly shuffled) sentences.
        labels: 1 where the word order is the original one, 0 where it is shuffled.
        source: ``"multi30k"`` or ``"dates"``.
    """

    sentences: list[str]
    labels: list[int]
    source: str


def plain_words(sentence: str) -> list[str]:
    """The words of a sentence, lowercase, without the punctuation at their ends.

    ``"A man, in a hat."`` gives ``["a", "man", "in", "a", "hat"]``; a piece that is only
    punctuation disappears. Inner characters stay (``"t-shirt"``, ``"man's"``).

    Args:
        sentence: any text; words are split at whitespace.

    Returns:
        The words, in their order.
    """
    stripped = (w.strip(string.punctuation) for w in sentence.lower().split())
    return [w for w in stripped if w]


def shuffle_word_order(sentences: list[str], seed: int = 0, min_words: int = 3) -> tuple[list[str], list[int]]:
    """Label each sentence 1 (kept) or 0 (its words shuffled), half and half at random.

    Every sentence is reduced to its :func:`plain_words` first, in both classes, so that neither
    punctuation (the final ".") nor capitals mark where the original sentence ends or starts.

    Args:
        sentences: the sentences; words are split at whitespace.
        seed: seed of the coin flips and of the shuffles.
        min_words: sentences with fewer words are dropped (too few orders to tell apart).

    Returns:
        ``(sentences, labels)``: the plain words joined by single spaces; a shuffled sentence
        always differs from its original.
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

    Args:
        split: "train", "validation" or "test".
        data_dir: folder with the Multi30k files.
        limit: keep the first ``limit`` sentences of the split (None: all).
        seed: seed of the labels and shuffles (each split adds its own offset).

    Returns:
        A :class:`WordOrderData`.
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
    """Right-pad lists of ids into one (B, T) int64 tensor, T the longest (cut to ``max_len``).

    Args:
        sequences: B lists of token ids.
        pad_id: the padding id.
        max_len: longest row kept; longer ones are truncated.

    Returns:
        (B, T) int64.
    """
    if not sequences:
        raise ValueError("sequences is empty: expected at least one list of ids")
    rows = [s[:max_len] if max_len is not None else s for s in sequences]
    out = torch.full((len(rows), max(1, max(len(r) for r in rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return out  # (B, T)
