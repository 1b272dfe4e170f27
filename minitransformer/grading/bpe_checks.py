"""Check for exercise 01: BPE merges learned by hand, compared with :func:`minitransformer.data.learn_bpe`."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable

from ..data.bpe import learn_bpe
from ._common import _SEED, _call, _describe, _isolated, _name, _passed

__all__ = ["check_bpe_merges"]

Pair = tuple[str, str]


def _bpe_variant(counts: dict[str, int], num_merges: int, *, ties: str = "ids", weighted: bool = True,
                 overlapping: bool = True, merge: str = "left", marker: bool = True,
                 min_frequency: int = 2) -> list[Pair]:
    """BPE with one thing done the usual wrong way (the defaults are right), to name a learner's mistake."""
    words = {tuple(w): n for w, n in counts.items()}
    made: dict[str, int] = {}
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pairs: Counter[Pair] = Counter()
        for symbols, n in words.items():
            seen = list(zip(symbols, symbols[1:]))
            for pair in (seen if overlapping else dict.fromkeys(seen)):
                if marker or "▁" not in pair:
                    pairs[pair] += n if weighted else 1
        if not pairs:
            break
        if ties == "first":
            best = pairs.most_common(1)[0][0]
        elif ties == "string":
            best = min(pairs, key=lambda p: (-pairs[p], p))
        else:
            best = min(pairs, key=lambda p: (-pairs[p], *[_rank(s, made) for s in p]))
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        made.setdefault(best[0] + best[1], len(made))
        merged: dict[tuple[str, ...], int] = {}
        for symbols, n in words.items():
            new = _merge(symbols, best, merge)
            merged[new] = merged.get(new, 0) + n
        words = merged
    return merges


def _rank(symbol: str, made: dict[str, int]) -> tuple[int, Any]:
    if symbol in made:
        return (1, made[symbol])
    return (0, ord(symbol)) if len(symbol) == 1 else (2, symbol)  # (2, ...): a symbol only a mistake makes


def _merge(symbols: tuple[str, ...], pair: Pair, how: str) -> tuple[str, ...]:
    # The usual mistakes, played as learner code inside the check: the package's merge_pair would trip the
    # check's own "calls the ready-made piece" sentinel, so even the correct scan is written out here.
    a, b = pair
    if how == "text":  # replacing text, blind to where one symbol ends
        return tuple(" ".join(symbols).replace(f"{a} {b}", a + b).split(" "))
    seq = list(symbols) if how == "left" else list(reversed(symbols))
    first, second = (a, b) if how == "left" else (b, a)
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == first and seq[i + 1] == second:
            out.append(a + b)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return tuple(out if how == "left" else reversed(out))


_MISTAKES: list[tuple[str, dict[str, Any]]] = [
    ("Ties: when several pairs share the highest count, take the pair with the smallest ids, left symbol "
     "first (single characters by code point, ord(c), then merged tokens in the order you made them), as "
     "the tokenizers trainer does; Counter.most_common takes the pair seen first.", {"ties": "first"}),
    ("Ties: a merged token ranks after every single character, in the order it was made, not alphabetically "
     "as a string.", {"ties": "string"}),
    ("Weight each word's pairs by the word's count: a word seen 5 times adds 5 to each of its pairs.",
     {"weighted": False}),
    ("Count every occurrence of a pair, overlapping ones too: the word 'a a a' holds the pair (a, a) twice.",
     {"overlapping": False}),
    ("Merge from left to right: with the pair (a, a), 'a a a' becomes 'aa a', not 'a aa'.", {"merge": "right"}),
    ("Merge whole symbols: replacing the text 'a b' in the joined word also matches the end of a longer "
     "symbol, as in 'xa b'; compare the symbols themselves, pair by pair.", {"merge": "text"}),
    ("The word-start marker ▁ is a character like any other: count and merge its pairs too ('▁' + 'a' -> '▁a').",
     {"marker": False}),
    ("Stop when the most frequent pair occurs fewer than 2 times, even before num_merges merges.",
     {"min_frequency": 1}),
]


def _cases() -> list[tuple[str, dict[str, int], int]]:
    rng = random.Random(_SEED)
    drawn = []
    for k in range(3):
        counts: dict[str, int] = {}
        for _ in range(12):
            word = "▁" + "".join(rng.choice("aabcd") for _ in range(rng.randint(1, 6)))
            counts[word] = counts.get(word, 0) + rng.randint(1, 4)
        drawn.append((f"drawn corpus {k + 1} of 3", counts, 30))
    return [
        ("a tie at the first step", {"▁ba": 2, "▁ab": 2, "▁cab": 1}, 3),
        ("ties between merged tokens", {"▁xyab": 3, "▁ab": 2, "▁xy": 2, "▁yz": 3}, 6),
        ("overlapping pairs", {"▁aaa": 4, "▁aaaa": 1, "▁aab": 2, "▁ba": 3}, 6),
        ("symbols that end like the pair", {"▁cab": 4, "▁ca": 6, "▁ab": 3, "▁abb": 2}, 6),
        ("weighted words", {"▁cd": 5, "▁ab": 1, "▁abx": 1, "▁aby": 1}, 2),
        ("a corpus that runs out of pairs", {"▁ab": 2, "▁cd": 1}, 5),
        *drawn,
    ]


def _as_merges(result: Any, text: str) -> list[Pair]:
    __tracebackhide__ = True
    if not isinstance(result, (list, tuple)):
        raise AssertionError(f"{text} returned {_describe(result)}; expected a list of merges, each a pair of "
                             "strings such as ('a', 'b')")
    merges = []
    for k, m in enumerate(result):
        if not isinstance(m, (list, tuple)) or len(m) != 2 or not all(isinstance(s, str) for s in m):
            raise AssertionError(f"{text}: merge {k} is {m!r}; expected a pair of strings (left, right), "
                                 "such as ('a', 'b'), not the merged token 'ab'")
        merges.append((m[0], m[1]))
    return merges


@_isolated(avoid=("minitransformer.data.bpe:learn_bpe", "minitransformer.data.bpe:merge_pair",
                  "minitransformer.data.bpe:count_pairs"))
def check_bpe_merges(fn: Callable[[dict[str, int], int], list[Pair]], *, task: int | str | None = None) -> None:
    """Check ``fn(word_counts, num_merges) -> merges``: BPE merges learned by hand (lesson 01).

    ``word_counts`` maps each word (with its word-start marker, e.g. ``"▁cat"``) to its count. The
    merges must equal :func:`minitransformer.data.learn_bpe` with ``min_frequency=2``: the most
    frequent pair of neighbouring symbols (overlapping pairs counted, words weighted by their
    counts), ties to the smallest (left, right) ids as in the ``tokenizers`` trainer, merged left to
    right; at most ``num_merges``, stopping once no pair occurs twice. Corpora: six built around the
    usual mistakes and three drawn by the grader.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for case, counts, num_merges in _cases():
        text = f"{_name(fn)}({counts!r}, {num_merges})" if len(counts) < 6 else \
            f"{_name(fn)}(<{len(counts)} words>, {num_merges}) [{case}]"
        given = _as_merges(_call(fn, dict(counts), num_merges, text=text), text)
        expected = learn_bpe(counts, num_merges, min_frequency=2)
        if given == expected:
            continue
        for hint, wrong in _MISTAKES:
            candidate = _bpe_variant(counts, num_merges, **wrong)
            if candidate != expected and given == candidate:
                raise AssertionError(f"{text}: wrong merges {given}. {hint}")
        k = next((i for i, (a, b) in enumerate(zip(given, expected)) if a != b), min(len(given), len(expected)))
        if k >= len(expected):
            raise AssertionError(f"{text}: {len(given)} merges where {len(expected)} were expected {expected}: stop "
                                 "after num_merges, or once no pair occurs at least twice")
        got = f"got {given[k]}" if k < len(given) else "got none (you stopped early)"
        raise AssertionError(f"{text}: merges 1 to {k} are right, merge {k + 1} should be {expected[k]}, {got}. "
                             f"Expected {expected}")
    _passed(task, f"BPE merges equal to learn_bpe (and tokenizers) on {len(_cases())} corpora: ties, overlapping "
                  "pairs, word counts, the marker, and 3 drawn corpora")
