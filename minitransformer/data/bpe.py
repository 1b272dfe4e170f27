"""Byte-pair encoding written out (Sennrich et al., 2016): the reference lesson 01 and its checks compare with.

It learns the same merges in the same order as ``tokenizers``' ``BpeTrainer`` (tests/test_bpe.py): ties
go to the pair with the smallest (left id, right id), not to the pair seen first as ``Counter.most_common``
would; words start with "▁", as in SentencePiece, rather than ending in ``</w>``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from .tokenizer import UNK, empty_tokenizer

__all__ = ["apply_bpe", "bpe_tokens", "count_pairs", "learn_bpe", "merge_pair", "pre_tokenize", "word_counts"]

Pair = tuple[str, str]


def pre_tokenize(text: str) -> list[str]:
    """Cut one text into words the way :class:`SharedTokenizer` does before BPE.

    NFC normalization, every space becomes "▁" and one "▁" goes in front, then runs of letters,
    single digits and single other symbols, each with its leading "▁".
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a sentence as a str, got {type(text).__name__}")
    tok = empty_tokenizer()
    normalized = tok.normalizer.normalize_str(text)
    return [word for word, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)]


def word_counts(texts: Iterable[str]) -> Counter[str]:
    """How often each pre-tokenized word occurs in ``texts`` (the input of :func:`learn_bpe`)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(pre_tokenize(text))
    return counts


def count_pairs(words: Mapping[tuple[str, ...], int]) -> Counter[Pair]:
    """Count adjacent symbol pairs over all words, each weighted by its word's count."""
    counts: Counter[Pair] = Counter()
    for symbols, count in words.items():
        for pair in zip(symbols, symbols[1:]):
            counts[pair] += count
    return counts


def merge_pair(symbols: Sequence[str], pair: Pair) -> tuple[str, ...]:
    """Replace each occurrence of ``pair`` in ``symbols`` by one symbol, scanning left to right.

    Occurrences do not overlap: ``merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")``.
    """
    left, right = pair
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn_bpe(counts: Mapping[str, int], num_merges: int | None = None, min_frequency: int = 2) -> list[Pair]:
    """Learn BPE merges from word counts, with the tie rule of ``tokenizers``' ``BpeTrainer``."""
    if num_merges is not None and num_merges < 0:
        raise ValueError(f"num_merges must be None or >= 0, got {num_merges}")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be at least 1, got {min_frequency}")
    words: Counter[tuple[str, ...]] = Counter()
    for word, count in counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"expected non-empty words as str, got {word!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"expected a positive int count for {word!r}, got {count!r}")
        words[tuple(word)] += count
    made: dict[str, int] = {}  # merged token -> the order it was first made in

    def rank(symbol: str) -> tuple[int, int]:
        return (1, made[symbol]) if symbol in made else (0, ord(symbol))

    merges: list[Pair] = []
    while num_merges is None or len(merges) < num_merges:
        pairs = count_pairs(words)
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], rank(p[0]), rank(p[1])))
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        made.setdefault(best[0] + best[1], len(made))
        merged: Counter[tuple[str, ...]] = Counter()
        for symbols, count in words.items():
            merged[merge_pair(symbols, best)] += count
        words = merged
    return merges


def apply_bpe(word: str, merges: Sequence[Pair], alphabet: Collection[str] | None = None) -> list[str]:
    """Cut one pre-tokenized word into pieces: apply the merges in the order they were learned."""
    symbols: tuple[str, ...] = tuple(c if alphabet is None or c in alphabet else UNK for c in word)
    for pair in merges:
        if len(symbols) < 2:
            break
        symbols = merge_pair(symbols, pair)
    return list(symbols)


def bpe_tokens(text: str, merges: Sequence[Pair], alphabet: Collection[str] | None = None) -> list[str]:
    """The BPE pieces of a whole sentence: :func:`pre_tokenize`, then :func:`apply_bpe` on each word."""
    return [piece for word in pre_tokenize(text) for piece in apply_bpe(word, merges, alphabet)]
