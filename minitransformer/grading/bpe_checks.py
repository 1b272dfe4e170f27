"""Check for exercise 01: BPE merges learned by hand, replayed step by step (lesson 01).

The check does not ask for one particular list of merges: it replays the learner's merges on the
corpus and accepts them when every merge is a most frequent pair of its step (pairs of neighbouring
symbols, each word weighted by its count, overlapping pairs counted, merged left to right), and when
the list stops where BPE stops. How ties between equally frequent pairs are broken is a convention
(the ``tokenizers`` trainer takes the smallest ids, as :func:`minitransformer.data.learn_bpe` does):
any choice passes. A list that fails is replayed again under each usual mistake's rules to name it.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable

from ._common import _SEED, _call, _describe, _isolated, _name, _passed

__all__ = ["check_bpe_merges"]

Pair = tuple[str, str]
Words = dict[tuple[str, ...], int]

# The rules of BPE as the task states them; each usual mistake changes one of them (see _MISTAKES).
_RULES: dict[str, Any] = {"weighted": True, "overlapping": True, "merge": "left", "marker": True, "min_frequency": 2}


def _pair_counts(words: Words, *, weighted: bool = True, overlapping: bool = True, marker: bool = True,
                 **_: Any) -> Counter[Pair]:
    """The pairs of neighbouring symbols and how often they occur, counted by the given rules."""
    pairs: Counter[Pair] = Counter()
    for symbols, n in words.items():
        seen = list(zip(symbols, symbols[1:]))
        for pair in (seen if overlapping else dict.fromkeys(seen)):
            if marker or "▁" not in pair:
                pairs[pair] += n if weighted else 1
    return pairs


def _apply(words: Words, pair: Pair, *, merge: str = "left", **_: Any) -> Words:
    merged: Words = {}
    for symbols, n in words.items():
        new = _merge(symbols, pair, merge)
        merged[new] = merged.get(new, 0) + n
    return merged


def _bpe_variant(counts: dict[str, int], num_merges: int, *, ties: str = "ids", **rules: Any) -> list[Pair]:
    """BPE learned by ``rules`` (a usual mistake, or none) with one tie rule: a learner's answer, simulated.

    ``ties``: "ids" (the ``tokenizers`` trainer's rule, equal to ``learn_bpe``), "first" (the pair seen
    first, as ``Counter.most_common`` takes it) or "string" (the smallest pair as strings).
    """
    rules = {**_RULES, **rules}
    words: Words = {tuple(w): n for w, n in counts.items()}
    made: dict[str, int] = {}
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pairs = _pair_counts(words, **rules)
        if not pairs:
            break
        if ties == "first":
            best = pairs.most_common(1)[0][0]
        elif ties == "string":
            best = min(pairs, key=lambda p: (-pairs[p], p))
        else:
            best = min(pairs, key=lambda p: (-pairs[p], *[_rank(s, made) for s in p]))
        if pairs[best] < rules["min_frequency"]:
            break
        merges.append(best)
        made.setdefault(best[0] + best[1], len(made))
        words = _apply(words, best, **rules)
    return merges


def _replay(counts: dict[str, int], num_merges: int, given: list[Pair], **rules: Any) -> str | None:
    """Why ``given`` is not a BPE of ``counts`` under ``rules`` (the task's by default), or None when it is one."""
    rules = {**_RULES, **rules}
    least = rules["min_frequency"]
    words: Words = {tuple(w): n for w, n in counts.items()}
    for k, pair in enumerate(given):
        pairs = _pair_counts(words, **rules)
        top = max(pairs.values(), default=0)
        right = f"merges 1 to {k} are right; " if k > 1 else "merge 1 is right; " if k == 1 else ""
        if k >= num_merges or top < least:
            why = (f"num_merges is {num_merges}" if k >= num_merges else
                   f"no pair occurs {least} times any more (the most frequent occurs {top} times)" if pairs else
                   "every word is a single symbol")
            return f"{right}BPE stops after {k} merges ({why}), but yours goes on with {pair}"
        if pairs.get(pair, 0) != top:
            best = sorted(p for p, n in pairs.items() if n == top)
            shown = ", ".join(map(str, best[:6])) + (", ..." if len(best) > 6 else "")
            counted = f"occurs {pairs[pair]} times" if pair in pairs else "does not occur"
            return (f"{right}merge {k + 1}, {pair}, {counted} at that step, but the most frequent "
                    f"{'pair occurs' if len(best) == 1 else 'pairs occur'} {top} times: {shown} "
                    "(each word's pairs counted with the word's count, overlapping pairs too)")
        words = _apply(words, pair, **rules)
    if len(given) < num_merges:
        pairs = _pair_counts(words, **rules)
        top = max(pairs.values(), default=0)
        if top >= least:
            best = min(p for p, n in pairs.items() if n == top)
            return (f"your list stops after {len(given)} merges, but BPE goes on: {best} still occurs {top} times; "
                    f"stop only after num_merges = {num_merges} merges, or when no pair occurs at least {least} times")
    return None


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
        ("a tie at the first step (either pair will do)", {"▁ba": 2, "▁ab": 2, "▁cab": 1}, 3),
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
    merges are replayed on the words: each must be a most frequent pair of neighbouring symbols at its
    step (overlapping pairs counted, words weighted by their counts), merged left to right, and the
    list must stop after ``num_merges`` merges or once no pair occurs twice (``min_frequency=2``).
    Ties may be broken any way; :func:`minitransformer.data.learn_bpe` (and the ``tokenizers``
    trainer) is one answer. Corpora: six built around the usual mistakes and three drawn by the grader.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: the first merge that is not a most frequent pair, and the likely mistake.
    """
    __tracebackhide__ = True
    for case, counts, num_merges in _cases():
        text = f"{_name(fn)}({counts!r}, {num_merges})" if len(counts) < 6 else \
            f"{_name(fn)}(<{len(counts)} words>, {num_merges}) [{case}]"
        given = _as_merges(_call(fn, dict(counts), num_merges, text=text), text)
        problem = _replay(counts, num_merges, given)
        if problem is None:
            continue
        for hint, wrong in _MISTAKES:
            if _replay(counts, num_merges, given, **wrong) is None:
                raise AssertionError(f"{text}: wrong merges {given}. {hint}")
        raise AssertionError(f"{text}: {problem}.")
    _passed(task, f"BPE merges replayed on {len(_cases())} corpora, each a most frequent pair of its step (ties "
                  "broken any way): overlapping pairs, word counts, the marker, and 3 drawn corpora")
