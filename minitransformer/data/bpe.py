"""Byte-pair encoding written out: the reference the lessons and the exercise checks compare with.

Lesson 01 derives BPE by hand and proves it equal to this module; this module is in turn equal to
the ``tokenizers`` library's ``BpeTrainer``, which :class:`~minitransformer.data.SharedTokenizer`
uses (``tests/test_bpe.py`` checks both on several corpora). The algorithm (Sennrich et al., 2016):

1. cut the text into words (pre-tokenization) and count them; a word is a sequence of symbols,
   at first its characters;
2. count every pair of adjacent symbols over all words, each word weighted by its count
   ("a a a" holds the pair (a, a) twice);
3. merge the most frequent pair everywhere, left to right ("a a a" becomes "aa a"), and record it;
4. repeat until the wanted number of merges, or until the best pair is rarer than ``min_frequency``.

**Ties.** Several pairs can share the highest count. ``tokenizers`` takes the pair whose (left id,
right id) is smallest, where the ids are: single characters in Unicode order, then merged tokens in
the order they were made. :func:`learn_bpe` uses the same rule, so both learn the same merges in
the same order. (Python's ``max`` on a ``Counter`` would take the pair seen first instead.)

**Word boundaries.** The package marks the start of every word with "▁" (U+2581, a character like
any other), as SentencePiece does; the original BPE appended an end-of-word marker ``</w>`` to the
last character. Either way "▁er" (a word start) and "er" (inside a word) become different tokens,
and decoding knows where the spaces go.
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

    Args:
        text: one sentence.

    Returns:
        The words, e.g. ``pre_tokenize("a cat.") == ["▁a", "▁cat", "."]``.
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
    """Count adjacent symbol pairs over all words, each weighted by its word's count.

    Args:
        words: each word as a tuple of symbols, with its count.

    Returns:
        ``Counter`` of ``(left, right)`` pairs; overlapping occurrences all count.
    """
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
    """Learn BPE merges from word counts, with the tie rule of ``tokenizers``' ``BpeTrainer``.

    Args:
        counts: each word (a pre-tokenized string, e.g. ``"▁cat"``) with how often it occurs.
        num_merges: stop after this many merges; ``None``: only ``min_frequency`` stops.
        min_frequency: stop when the most frequent pair occurs fewer times than this.

    Returns:
        The merges in the order learned, e.g. ``[("a", "t"), ("▁c", "at")]`` (the second builds on
        the first). Ties between pairs of equal count go to the smallest (left rank, right rank):
        characters rank by code point and before every merged token, merged tokens by creation.

    Raises:
        ValueError: a count that is not a positive integer, an empty word, or a negative limit.
    """
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
    """Cut one pre-tokenized word into pieces: apply the merges in the order they were learned.

    Args:
        word: one word as :func:`pre_tokenize` gives it.
        merges: the merges of :func:`learn_bpe`.
        alphabet: the known characters; any other becomes ``"<unk>"`` and is never merged.
            ``None``: every character is known.

    Returns:
        The pieces, e.g. ``["▁c", "at", "s"]``.
    """
    symbols: tuple[str, ...] = tuple(c if alphabet is None or c in alphabet else UNK for c in word)
    for pair in merges:
        if len(symbols) < 2:
            break
        symbols = merge_pair(symbols, pair)
    return list(symbols)


def bpe_tokens(text: str, merges: Sequence[Pair], alphabet: Collection[str] | None = None) -> list[str]:
    """The BPE pieces of a whole sentence: :func:`pre_tokenize`, then :func:`apply_bpe` on each word."""
    return [piece for word in pre_tokenize(text) for piece in apply_bpe(word, merges, alphabet)]
