"""Exercise 01's BPE task: the check passes a right answer whatever its tie rule, and names each usual mistake
(the grader's scores of the notebooks: grader/tests/test_grading_tasks.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from minitransformer.checks import check_bpe_merges
from minitransformer.checks.lesson01 import _MISTAKES, _bpe_variant, _cases, _replay
from minitransformer.data import learn_bpe

ROOT = Path(__file__).resolve().parents[1]


def my_bpe(word_counts: dict[str, int], num_merges: int) -> list[tuple[str, str]]:
    """A learner's answer, written apart from the package."""
    words = {tuple(w): n for w, n in word_counts.items()}
    order: dict[str, int] = {}
    merges: list[tuple[str, str]] = []
    while len(merges) < num_merges:
        counts: Counter = Counter()
        for symbols, n in words.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += n
        ids = lambda s: (1, order[s]) if s in order else (0, ord(s))  # noqa: E731
        best = min(counts, key=lambda p: (-counts[p], ids(p[0]), ids(p[1])), default=None)
        if best is None or counts[best] < 2:
            break
        merges.append(best)
        order.setdefault("".join(best), len(order))
        new_words: dict = {}
        for symbols, n in words.items():
            out, i = [], 0
            while i < len(symbols):
                if symbols[i:i + 2] == best:
                    out.append("".join(best))
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + n
        words = new_words
    return merges


def test_a_right_answer_passes(capsys: pytest.CaptureFixture[str]) -> None:
    check_bpe_merges(my_bpe, task=5)
    assert "✓ Task 5 passed" in capsys.readouterr().out
    check_bpe_merges(lambda c, n: [list(m) for m in my_bpe(c, n)])  # lists for pairs are fine


def test_the_right_variant_is_the_package_s_reference() -> None:
    for _, counts, n in _cases():
        assert _bpe_variant(counts, n) == learn_bpe(counts, n) == my_bpe(counts, n)
        assert _replay(counts, n, learn_bpe(counts, n)) is None


@pytest.mark.parametrize("ties", ["first", "string"])
def test_any_tie_rule_passes(ties: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Counter.most_common (the pair seen first) and the smallest strings are BPE too, only not tokenizers' order.
    differs = [case for case, counts, n in _cases() if _bpe_variant(counts, n, ties=ties) != learn_bpe(counts, n)]
    assert differs, "the corpora should hold ties that the rules break differently"
    check_bpe_merges(lambda counts, n: _bpe_variant(counts, n, ties=ties), task=5)
    assert "✓ Task 5 passed" in capsys.readouterr().out


@pytest.mark.parametrize("ties", ["ids", "first"])
@pytest.mark.parametrize("hint, wrong", _MISTAKES, ids=[str(w) for _, w in _MISTAKES])
def test_each_usual_mistake_is_named(hint: str, wrong: dict, ties: str) -> None:
    with pytest.raises(AssertionError) as error:
        check_bpe_merges(lambda counts, n: _bpe_variant(counts, n, ties=ties, **wrong))
    assert hint in str(error.value)


def test_a_merge_that_is_not_the_most_frequent_is_named_with_its_counts() -> None:
    weighted = {"▁cd": 5, "▁ab": 1, "▁abx": 1, "▁aby": 1}  # (▁, c) and (c, d) 5 times, (a, b) 3 times

    def second_best(counts: dict[str, int], n: int) -> list[tuple[str, str]]:
        return [("a", "b")] if counts == weighted else my_bpe(counts, n)

    with pytest.raises(AssertionError) as error:
        check_bpe_merges(second_best)
    message = str(error.value)
    assert "merge 1, ('a', 'b'), occurs 3 times at that step, but the most frequent pairs occur 5 times: " \
           "('c', 'd'), ('▁', 'c')" in message, message
    with pytest.raises(AssertionError, match=r"merge 1, \('z', 'z'\), does not occur at that step"):
        check_bpe_merges(lambda counts, n: [("z", "z")] + my_bpe(counts, n)[1:])


def test_stopping_early_or_late_is_named() -> None:
    with pytest.raises(AssertionError, match=r"stops after 0 merges, but BPE goes on: \('c', 'd'\) still occurs 5 "):
        check_bpe_merges(lambda counts, n: [] if "▁cd" in counts else my_bpe(counts, n))
    with pytest.raises(AssertionError, match=r"BPE stops after 3 merges \(num_merges is 3\), but yours goes on"):
        check_bpe_merges(lambda counts, n: my_bpe(counts, n + 1))


def test_other_wrong_answers_are_explained() -> None:
    with pytest.raises(AssertionError, match=r"merge 1 is right; merge 2, \('x', 'y'\), does not occur"):
        check_bpe_merges(lambda counts, n: my_bpe(counts, n)[:1] + [("x", "y")] * (len(my_bpe(counts, n)) - 1))
    with pytest.raises(AssertionError, match="not the merged token"):
        check_bpe_merges(lambda counts, n: ["".join(m) for m in my_bpe(counts, n)])
    with pytest.raises(AssertionError, match="expected a list of merges"):
        check_bpe_merges(lambda counts, n: None)
    with pytest.raises(AssertionError, match="ready-made version"):
        check_bpe_merges(lambda counts, n: learn_bpe(counts, n), task=5)
