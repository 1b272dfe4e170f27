"""Checks for the conceptual questions of the exercises: a choice of letters, or a few numbers.

Every question has a key such as ``"08-bf16-loss-scaling"``; the notebook shows its text and the
learner writes ``answer = "B"`` (or a set of letters, or a tuple of numbers). A wrong answer gets
the explanation of what it confuses, so the check teaches as well as grades.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .compare import isolated, report_passed

__all__ = ["QUESTIONS", "check_answer"]


@dataclass(frozen=True)
class Question:
    title: str
    correct: Any  # a letter, a frozenset of letters, or a tuple of numbers
    why: str  # printed with the pass line
    wrong: dict[Any, str] = field(default_factory=dict)  # explanations of tempting wrong answers
    hint: str = ""  # for any other wrong answer


QUESTIONS: dict[str, Question] = {
    "00-sequential-steps": Question(
        title="sequential steps and path lengths for n = 50",
        correct=(50, 49, 1),
        why="a GRU needs 50 steps one after the other, kernel-3 convolutions 49 layers, self-attention 1 layer",
        wrong={
            (50, 49, 50): "Look again at the self-attention count: in one self-attention layer, which keys can a query read?",
            (50, 25, 1): "Look again at the convolution count: how much further does each kernel-3 layer reach?",
            (49, 49, 1): "Look again at the GRU count: how many words does it read, and can two of them be read at once?",
            (50, 50, 1): "Look again at the convolution count: how many positions apart are the first and the last word?",
        },
        hint="Answer with a tuple (GRU steps, kernel-3 convolution layers, self-attention layers).",
    ),
    "02-pe-properties": Question(
        title="properties of the sinusoidal encoding",
        correct=frozenset("ABD"),
        why=("each position up to max_len gets its own vector (A), every entry is a sine or cosine in [-1, 1] (B), "
             "and a fixed offset k is the same linear map M_k for every position (D); nothing is learned (C) and "
             "the formula gives a vector for any position, seen in training or not (E)"),
        wrong={
            frozenset("ABCD"): "One of your statements does not hold: is any number of the table learned?",
            frozenset("ABDE"): "One of your statements does not hold: does the formula stop at the lengths seen in "
                               "training?",
            frozenset("AB"): "A statement that holds is missing: what did task 2 show about a fixed offset?",
            frozenset("BD"): "A statement that holds is missing: can two positions up to max_len share a row?",
        },
        hint="Go through the five statements one by one with the formula and your task 2 in mind.",
    ),
    "03-nan-rows": Question(
        title="which masks make my_attention return a row of NaN",
        correct=frozenset("BC"),
        why=("a row is NaN exactly when its query may attend to no key: masking the padding queries' rows (B) "
             "and a sentence made only of padding (C); a padding mask (B, 1, 1, S) on sentences with at least "
             "one real token leaves every query a key (A), and the package's attention returns zeros (D)"),
        wrong={
            frozenset("ABC"): "One of your masks never empties a row: a mask that hides keys leaves a query a key "
                              "as long as its sentence has a real token.",
            frozenset("B"): "Another mask leaves a query with no key: think of a sentence with no real token.",
            frozenset("C"): "Another mask leaves a query with no key: for each mask, ask whether it hides keys "
                            "(columns) or queries (rows).",
            frozenset("BCD"): "One of your choices returns no NaN: what does the package's attention do with a query "
                              "that has no key to read?",
            frozenset("A"): "A padding mask (B, 1, 1, S) hides keys; every sentence here has a real key, so no row "
                            "is empty. Look for masks that leave a query no key at all.",
        },
        hint="A row of weights is NaN when its query may attend to no key at all (all scores -inf, softmax 0/0).",
    ),
    "04-base-model-heads": Question(
        title="heads of the base model",
        correct=(8, 64, 64),
        why="h = 8 heads of d_k = d_v = 512 / 8 = 64",
        wrong={
            (8, 512, 512): "Each head works in d_model / h dimensions, not in all d_model of them.",
            (6, 64, 64): "6 is the number of layers N; the number of heads is h.",
        },
        hint="Answer with a tuple (h, d_k, d_v) for d_model = 512, as in the paper's Table 3.",
    ),
    "06-nan-rows": Question(
        title="masks that leave a query with no key",
        correct=frozenset("CD"),
        why="an all-padding source (C) and tril(-1) (D, whose row 0 is empty) give rows of -inf and a 0/0 softmax",
        wrong={
            frozenset("C"): "Another mask leaves a query with no key: look at the first row of each triangle.",
            frozenset("D"): "Another mask leaves a query with no key: think of a source with no real token.",
            frozenset("BCD"): "One of your masks never empties a row: which position of a target is always a real "
                              "token, and does it see itself?",
            frozenset("ACD"): "One of your masks never empties a row: does every query of a causal mask see itself?",
        },
        hint="A row is NaN when its query may attend to no key at all: find the masks with an all-False row.",
    ),
    "08-bf16-loss-scaling": Question(
        title="why bf16 needs no loss scaling",
        correct="B",
        why="bfloat16 keeps float32's 8 exponent bits, so tiny gradients do not underflow to 0",
        wrong={
            "A": "bfloat16 has FEWER mantissa bits than float16 (7 against 10): it is less precise, not more.",
            "C": "Autocast runs the products in bf16 on the GPU, gradients included; the reason is the range.",
            "D": "bf16 gradients can be as tiny as fp16 ones; what differs is whether such numbers still exist.",
        },
    ),
}


def _normalise(answer: Any) -> Any:
    if isinstance(answer, str):
        letters = [c for c in answer.upper() if c.isalpha()]
        return letters[0] if len(letters) == 1 else frozenset(letters)
    if isinstance(answer, (set, frozenset)):
        return frozenset(str(a).strip().upper() for a in answer)
    if isinstance(answer, (list, tuple)):
        return tuple(int(a) if isinstance(a, float) and a.is_integer() else a for a in answer)
    return answer


def grade_answer(table: dict[str, Question], question: str, answer: Any, task: int | str | None,
              expected: str = "your answer", other: str = "Read the options again, one at a time.") -> None:
    """Compare ``answer`` with ``table[question]`` (the body of :func:`check_answer` and of exercise 10's
    prediction check): pass with the reason, or fail with what the answer confuses (``other`` for an
    answer the question does not explain)."""
    __tracebackhide__ = True
    if question not in table:
        raise KeyError(f"no question {question!r}; known: {', '.join(sorted(table))}")
    q = table[question]
    if answer is None or answer is ...:
        raise AssertionError(f"Question '{q.title}': set `answer` to {expected} first.")
    given = _normalise(answer)
    correct = q.correct
    if isinstance(correct, frozenset) and isinstance(given, str):
        given = frozenset(given)
    if given == correct:
        report_passed(task, f"{q.title}: {q.why}")
        return
    explanation = q.wrong.get(given, q.hint or other)
    raise AssertionError(f"Question '{q.title}': {answer!r}: not yet. {explanation}")


@isolated
def check_answer(question: str, answer: Any, *, task: int | str | None = None) -> None:
    """Check the answer to the conceptual question ``question`` (a key of :data:`QUESTIONS`).

    Args:
        question: the question's key, as in the check cell.
        answer: the learner's answer: a letter ``"B"``, letters ``{"C", "D"}``, or a tuple of numbers.
        task: task number printed on success.

    Raises:
        AssertionError: the answer is missing or wrong, with what it confuses.
    """
    __tracebackhide__ = True
    grade_answer(QUESTIONS, question, answer, task)
