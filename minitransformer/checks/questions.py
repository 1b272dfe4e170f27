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
            (50, 49, 50): "One self-attention layer compares every pair of positions at once: 1 layer connects them.",
            (50, 25, 1): "A kernel of 3 reaches 1 position to each side per layer, so 49 layers are needed, not 25.",
            (49, 49, 1): "The GRU reads the 50 words one at a time: 50 sequential steps.",
            (50, 50, 1): "Position 49 is 49 steps from position 0, and each kernel-3 layer covers one of them: 49.",
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
            frozenset("ABCD"): "C: the table is a formula of the position and the feature index; the paper "
                               "compares it with learned positions (Table 3, row E), but this one has no parameter.",
            frozenset("ABDE"): "E: the formula works for any position, so a longer sentence still gets vectors "
                               "(whether the model handles them well is another matter).",
            frozenset("AB"): "D as well: task 2 built the matrix M_k, and PE[p + k] = PE[p] @ M_k for every p.",
            frozenset("BD"): "A as well: the sines and cosines of many wavelengths together differ for every "
                             "position up to max_len (the lesson's table shows no two equal rows).",
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
            frozenset("ABC"): "A: every sentence keeps at least one real key, and a padding mask (B, 1, 1, S) hides "
                              "keys, never a whole row, so each query still has a key to attend to.",
            frozenset("B"): "C as well: when every token of a sentence is padding, each of its queries has only "
                            "-inf scores.",
            frozenset("C"): "B as well: (tokens != pad_id)[:, None, :, None] hides whole ROWS, those of the "
                            "padding queries, so their scores are all -inf.",
            frozenset("BCD"): "D: the package's scaled_dot_product_attention sets the weights of masked keys to 0 "
                              "after the softmax, so a row with no visible key becomes zeros, not NaN.",
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
            frozenset("C"): "Look at row 0 of D as well: tril(-1) removes the diagonal, so query 0 sees no key.",
            frozenset("D"): "C hides every key of that sentence: each of its queries has only -inf scores.",
            frozenset("BCD"): "B never empties a row: position 0 is always <bos>, a real token that sees itself.",
            frozenset("ACD"): "A (the causal mask) always keeps the diagonal: every query sees at least itself.",
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
    raise AssertionError(f"Question '{q.title}': {answer!r} is not right. {explanation}")


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
