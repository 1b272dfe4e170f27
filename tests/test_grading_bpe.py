"""Exercise 01's BPE task: the check passes a right answer, names each usual mistake, and grades the notebooks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from minitransformer.data import learn_bpe
from minitransformer.grading import check_bpe_merges, grade_notebook
from minitransformer.grading.bpe_checks import _MISTAKES, _bpe_variant, _cases

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


@pytest.mark.parametrize("hint, wrong", _MISTAKES, ids=[str(w) for _, w in _MISTAKES])
def test_each_usual_mistake_is_named(hint: str, wrong: dict) -> None:
    with pytest.raises(AssertionError) as error:
        check_bpe_merges(lambda counts, n: _bpe_variant(counts, n, **wrong))
    assert hint in str(error.value)


def test_other_wrong_answers_are_explained() -> None:
    with pytest.raises(AssertionError, match="merge 2 should be"):
        check_bpe_merges(lambda counts, n: my_bpe(counts, n)[:1] + [("x", "y")] * (len(my_bpe(counts, n)) - 1))
    with pytest.raises(AssertionError, match="not the merged token"):
        check_bpe_merges(lambda counts, n: ["".join(m) for m in my_bpe(counts, n)])
    with pytest.raises(AssertionError, match="expected a list of merges"):
        check_bpe_merges(lambda counts, n: None)
    with pytest.raises(AssertionError, match="ready-made version"):
        check_bpe_merges(lambda counts, n: learn_bpe(counts, n), task=5)


def test_the_solution_scores_full_and_the_blank_exercise_zero_on_the_bpe_task() -> None:
    for folder, expected in (("solutions", 1.0), ("exercises", 0.0)):
        report = grade_notebook(ROOT / folder / "01_embeddings.ipynb", exercise="01_embeddings", timeout=300)
        task = next(t for t in report.tasks if t.title == "BPE merges")
        assert task.points > 0 and task.score == expected * task.points, (folder, task)
