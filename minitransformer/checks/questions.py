"""Checks for the questions of the exercises, the predictions before an experiment, and exercise 10's experiment.

Every question has a key such as ``"08-bf16-loss-scaling"``; the learner writes ``answer = "B"`` (or letters,
or a tuple of numbers, within a tolerance where the question gives one). A wrong answer gets "not yet" and a
pointer to the idea to check, never the answer. :func:`check_prediction` makes an experiment cell wait for a
prediction (ungraded) and prints it beside the result; :func:`check_diagnosis` grades exercise 10's matching of
unlabelled curves, :func:`check_ablation_runs` and :func:`check_ablation_verdicts` its experiment, from the
learner's own run records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .compare import isolated, report_passed

__all__ = ["DIAGNOSES", "QUESTIONS", "check_ablation_runs", "check_ablation_verdicts", "check_answer",
           "check_diagnosis", "check_prediction"]


@dataclass(frozen=True)
class Question:
    title: str
    correct: Any  # a letter, a frozenset of letters, or a tuple of numbers
    why: str  # printed with the pass line
    wrong: dict[Any, str] = field(default_factory=dict)  # explanations of tempting wrong answers
    hint: str = ""  # for any other wrong answer
    tolerance: float = 0.0  # numbers of the answer: relative to max(1, |correct|)


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
    # --- Reasoning that no cell prints (issue 43, item 3): one or two per exercise, after its silent bug ----------
    "01-tied-gradient": Question(
        title="which rows of a tied matrix learn",
        correct="D",
        why="the output layer computes a logit h . E_j for every token j, and the cross-entropy's gradient on "
            "logit j is p_j - y_j, non-zero for every token since the softmax gives each one some probability; "
            "so every row gets (p_j - y_j) h, and rows 4 and 7 also get the embedding's gradient",
        wrong={
            "A": "You counted one of the matrix's two uses. Which rows does the output layer read to "
                 "compute the logits, and which of those does the loss's gradient reach?",
            "E": "The two uses add their gradients into the rows they read. Would they cancel exactly, "
                 "and in every row?",
        },
        hint="The cross-entropy's gradient on logit j is p_j - y_j. For which tokens j is it zero?",
    ),
    "01-embedding-length": Question(
        title="the length of an embedded token",
        correct=(1, 512),
        why="each entry of a row has variance 1/d_model, so a row of 512 entries has expected squared length "
            "512 / 512 = 1; times sqrt(512), every entry has variance 1 and the vector's squared length is 512",
        wrong={
            (1, 22.627): "Scaling a vector by c scales its squared length by c squared.",
            (512, 512): "What is the variance of one entry of a row before the scaling, and how many "
                        "entries does a row have?",
        },
        hint="Add up the expected squares of the entries: d_model entries, each of variance 1/d_model before the "
             "scaling. Then multiply the vector by sqrt(d_model).",
        tolerance=0.01,
    ),
    "02-pe-lengths": Question(
        title="lengths and dot products of the positional table",
        correct=(256, "B"),
        why="each pair of columns holds (sin, cos) of one angle, so it adds 1 to the squared length: 512 / 2 = "
            "256 for every position; and PE[p] . PE[p + k] = sum over pairs of cos(k w_i) (the cosine of a "
            "difference of angles), which depends on the offset k only",
        wrong={
            (512, "B"): "What does one pair of columns, sin(x) and cos(x), add to the squared length?",
            (256, "A"): "Expand sin(a) sin(b) + cos(a) cos(b) for one pair of columns. Does p remain?",
            (256, "C"): "Expand sin(a) sin(b) + cos(a) cos(b) for one pair of columns, and ask whether the "
                        "sum over the pairs can vanish for every k.",
            (256, "D"): "Expand sin(a) sin(b) + cos(a) cos(b) for one pair of columns: each pair turns by "
                        "its own angle k w_i.",
        },
        hint="Answer with a tuple (squared length, letter). One pair of columns holds sin and cos of one angle.",
        tolerance=0.001,
    ),
    "03-unscaled-entropy": Question(
        title="attention's entropy as d_k grows, unscaled",
        correct="B",
        why="a score is a sum of d_k products of unit variance, so its spread grows like sqrt(d_k); a softmax of "
            "ever more spread-out scores puts nearly all the weight on the largest one: the entropy falls towards "
            "0 and the gradient of the softmax with it. Dividing by sqrt(d_k) keeps the spread at 1",
        wrong={
            "C": "Averaging would shrink a mean of d_k terms, but a dot product is a sum. How does the "
                 "spread of a sum of d_k independent terms grow?",
        },
        hint="A softmax is unchanged when the same number is added to every score, not when the scores are "
             "multiplied. Compare softmax([1, 2]) with softmax([10, 20]).",
    ),
    "03-score-spread": Question(
        title="the spread of a score",
        correct=(8, 2),
        why="q . k sums d_k = 16 independent products of variance 1 x 4 = 4: variance 64, standard deviation 8; "
            "divided by sqrt(16) = 4, it is 2. The scaling sets the spread to 1 only when q and k have unit variance",
        wrong={
            (64, 16): "The question asks for standard deviations, not variances.",
            (4, 1): "The variance of a product of two independent zero-mean variables is the product "
                    "of their variances, and a score sums d_k of them.",
            (8, 1): "Dividing by sqrt(d_k) divides the standard deviation by sqrt(d_k); it does not "
                    "set it to 1 whatever the inputs.",
        },
        hint="Answer with a tuple (unscaled, scaled). The variance of a product of two independent zero-mean "
             "variables is the product of their variances, and variances of independent terms add.",
        tolerance=0.01,
    ),
    "04-heads-parameters": Question(
        title="the parameters of multi-head attention and the number of heads",
        correct=(1050624, 1050624),
        why="w_q, w_k, w_v and w_o are each (512 x 512) plus 512 biases whatever h is: 4 x 262,656 = 1,050,624; "
            "the heads only cut the projected vectors into h slices of d_k = 512 / h",
        wrong={
            (1048576, 1048576): "Nn.Linear has a bias too.",
            (1050624, 131328): "With h = 1, d_k = 512. Which of the four projections changes shape?",
        },
        hint="Answer with a tuple (h = 8, h = 1). Write the shape of w_q, w_k, w_v and w_o, with their biases, "
             "and ask which of them depends on h.",
    ),
    "05-layer-norm-output": Question(
        title="what LayerNorm's gain and bias leave",
        correct=(2, 3),
        why="the normalised vector has mean 0 and standard deviation 1 over its features; multiplying every "
            "feature by 3 and adding 2 gives mean 2 and standard deviation 3, whatever the input",
        wrong={
            (0, 1): "That is before the gain and the bias. What do they do to each feature?",
            (3, 2): "Which of gamma and beta moves the mean, and which stretches the spread?",
            (2, 9): "The question asks for the standard deviation, not the variance.",
        },
        hint="Answer with a tuple (mean, standard deviation). Normalise first, then apply gamma and beta to "
             "every feature.",
        tolerance=0.01,
    ),
    "06-which-masks-see-ahead": Question(
        title="which masks let position 3 read position 5",
        correct=frozenset("BCE"),
        why="mask[3, 5] is True for triu() (B: keys k >= q), for tril().T (C, the same triangle) and for tril(2) "
            "(E: keys up to q + 2); tril() (A) and ~triu(1) (D, the causal mask written another way) hide it",
        wrong={
            frozenset("B"): "Another mask lets query 3 read key 5. Write out the transposed triangle and "
                            "the shifted diagonal.",
            frozenset("BC"): "Another mask lets query 3 read key 5: which keys does tril(2) keep for "
                             "query q?",
            frozenset("BCDE"): "One of your masks is a causal mask written another way: negate triu(1).",
            frozenset("AD"): "Rows are queries and columns are keys. Which masks have True at row 3, "
                             "column 5?",
        },
        hint="Rows are queries, columns keys: for each mask, work out whether its entry at row 3, column 5 is True.",
    ),
    "06-greedy-cost": Question(
        title="the cost of greedy decoding without a cache",
        correct=(10, 55, 10),
        why="one decoder call per generated token: 10; without a cache call t runs the decoder on the whole prefix "
            "of t positions, 1 + 2 + ... + 10 = 55 in all, so the cost grows as L^2 / 2; a key/value cache runs "
            "only the new position, 10 in all",
        wrong={
            (10, 10, 10): "Without a cache, how long is the prefix the decoder reads at step t?",
            (10, 100, 10): "The prefix grows by one at each step; it is not always 10 long.",
            (10, 55, 55): "What does a key/value cache keep from the earlier steps, and what is left to "
                          "compute at step t?",
        },
        hint="Answer with a tuple (decoder calls, query positions without a cache, with a cache). Write the length "
             "of the prefix at each of the 10 steps.",
    ),
    "07-smoothing-floor": Question(
        title="the lowest label-smoothed loss",
        correct=0.5649,
        why="the cross-entropy -sum q log p is smallest when p = q, and then it is the entropy of q: "
            "-(0.9 ln 0.9 + 11 x (0.1 / 11) ln(0.1 / 11)) = 0.565 nats per token; a model that is sure of the "
            "right token (the cell above) pays far more",
        wrong={
            2.0: "That is the loss of a model that is sure of the right token. Is that the best a model "
                    "can do against a target that is not one-hot?",
            0.0: "The target is not one-hot. Can any distribution p give cross-entropy 0 against it?",
            0.1: "That is epsilon, the mass the target spreads; the loss is measured in nats.",
        },
        hint="For which p is -sum q log p smallest (Gibbs' inequality)? Then compute that value for q with 0.9 on "
             "the right token, 0 on <pad> and 0.1 / 11 on each of the 11 others.",
        tolerance=0.01,
    ),
    "07-schedule-scaling": Question(
        title="the peak of the schedule under a change of size",
        correct=(0.5, 0.7071),
        why="the peak is d_model^-0.5 warmup^-0.5: four times d_model halves it, twice the warm-up divides it by "
            "sqrt(2), a factor 0.707",
        wrong={
            (0.25, 0.5): "The peak depends on square roots of d_model and of warmup.",
            (0.5, 1.4142): "A longer warm-up rises more slowly. Is the peak it reaches higher or lower?",
        },
        hint="Answer with a tuple of two factors. Put step = warmup into the formula of task 3: the peak.",
        tolerance=0.01,
    ),
    "08-length-penalty": Question(
        title="which hypothesis the length penalty picks",
        correct=("A", "B", "B"),
        why="normalised scores: alpha = 0, -2.0 against -2.9 (A); alpha = 0.6, -2.0 / 1.275 = -1.568 against "
            "-2.9 / 1.868 = -1.552 (B, by a little); alpha = 1, -1.333 against -1.024 (B)",
        wrong={
            ("A", "A", "B"): "At alpha = 0.6, work out both normalised scores to three decimals.",
            ("A", "A", "A"): "A longer hypothesis is divided by a larger ((5 + |Y|) / 6)^alpha. Work out "
                             "both scores at each alpha.",
        },
        hint="Answer with a tuple of three letters. Divide each log-probability by ((5 + |Y|) / 6)^alpha; the "
             "higher normalised score wins.",
    ),
    "09-temperature-limits": Question(
        title="temperature and top-k at their limits",
        correct=(1, 0.2, 0),
        why="dividing the logits by T -> 0 stretches their gaps without bound, so the largest takes all the "
            "probability; T -> infinity shrinks every gap to 0, a uniform distribution over what top-k keeps "
            "(1/5 each), and a token that top-k removed stays at 0",
        wrong={
            (0.2, 1, 0): "Dividing by a small T makes the gaps between logits larger or smaller?",
            (1, 0.05, 0): "As T grows, the distribution spreads evenly over which tokens?",
        },
        hint="Answer with a tuple of three probabilities. Look at the gaps between the logits after dividing by T, "
             "and at what top-k sets to -inf.",
        tolerance=0.01,
    ),
}


def _normalise(answer: Any) -> Any:
    if isinstance(answer, str):
        letters = [c for c in answer.upper() if c.isalpha()]
        return letters[0] if len(letters) == 1 else frozenset(letters)
    if isinstance(answer, (set, frozenset)):
        return frozenset(str(a).strip().upper() for a in answer)
    if isinstance(answer, (list, tuple)):
        return tuple(a.strip().upper() if isinstance(a, str) else int(a) if isinstance(a, float) and a.is_integer()
                     else a for a in answer)
    return answer


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _matches(given: Any, correct: Any, tolerance: float) -> bool:
    """Equal, or for numbers (alone or in a tuple) within ``tolerance`` of ``max(1, |correct|)``."""
    if tolerance and _is_number(given) and _is_number(correct):
        return math.isfinite(given) and abs(given - correct) <= tolerance * max(1.0, abs(correct))
    if tolerance and isinstance(given, tuple) and isinstance(correct, tuple):
        return len(given) == len(correct) and all(_matches(g, c, tolerance) for g, c in zip(given, correct))
    return given == correct


def _explain(q: Question, given: Any, other: str) -> str:
    for wrong, text in q.wrong.items():
        if _matches(given, wrong, q.tolerance):
            return text
    return q.hint or other


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
        raise AssertionError(f"Question '{q.title}': set `answer` to {expected} first (the variable this task's "
                             "cell assigns: `answer`, or `answer_N` where a notebook asks several questions).")
    given = _normalise(answer)
    correct = q.correct
    if isinstance(correct, frozenset) and isinstance(given, str):
        given = frozenset(given)
    if _matches(given, correct, q.tolerance):
        report_passed(task, f"{q.title}: {q.why}")
        return
    explanation = _explain(q, given, other)
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


# --- Predict before you run (ungraded) -------------------------------------------------------------------------

class PredictionMissing(RuntimeError):
    """An experiment cell ran before its prediction was written."""

def check_prediction(prediction: Any, result: str | None = None) -> None:
    """Predict before you run: refuse to run an experiment until ``prediction`` is written (not graded).

    Call it first in the experiment's cell with the prediction alone: it raises :class:`PredictionMissing`,
    with what to do, while the prediction is empty, and is silent otherwise. Call it again at the end with
    ``result``, a line that says what came out: it prints the prediction and the result one above the other.
    """
    text = prediction.strip() if isinstance(prediction, str) else ""
    if not text:
        raise PredictionMissing("Predict before you run: write what you expect, and why, in the cell above "
                                "this one (a sentence or a number: it is not graded, and a wrong guess "
                                "teaches as much as a right one), run that cell, then run this one again.")
    if result is not None:
        print(f"Your prediction: {text}\nWhat happened:   {result}")


# --- Exercise 10: a run to diagnose, and an experiment of the learner's own ---------------------------------------

@dataclass(frozen=True)
class Diagnosis:
    """Unlabelled curves to match with the changes that made them: the right match, and a pointer per curve."""

    title: str
    correct: dict[str, str]  # curve letter -> variant name
    why: str
    pointers: dict[str, str]  # curve letter -> what to look at when that curve is matched wrongly


DIAGNOSES: dict[str, Diagnosis] = {
    "10-four-curves": Diagnosis(
        title="four training runs, unlabelled",
        correct={"W": "dropout_0", "X": "no_warmup", "Y": "baseline", "Z": "no_scale"},
        why="X falls fastest in the first 50 steps (the peak rate from step 1) and then ends higher: the first "
            "large updates, made before Adam's estimates settle, cost it for the rest of the run; Z is the slowest "
            "at every step (unscaled scores saturate the softmax, whose gradients then vanish); W has the lowest "
            "training loss (no dropout noise in training), and at this short budget a better validation "
            "perplexity too; Y, the recipe, lies between them",
        pointers={
            "W": "Curve W: it trains more easily than the recipe at every step without a larger model or a higher "
                 "rate. Which change takes noise out of training itself?",
            "X": "Curve X: look at the first 50 steps, then at the end. Which change acts early, and why could a "
                 "fast start cost a run later?",
            "Y": "Curve Y: ask of each change whether it should make training faster or slower than the recipe, "
                 "then find the curve that none of them explains.",
            "Z": "Curve Z: it is the slowest from start to end, not only early. Which change hurts every step, "
                 "through the gradients that attention passes back?",
        },
    ),
}


@isolated
def check_diagnosis(question: str, answer: Any, *, task: int | str | None = None) -> None:
    """Check ``answer``, ``{"W": "variant name", ...}``, against the diagnosis ``question`` of :data:`DIAGNOSES`:
    a wrong match gets "not yet" and a pointer for each curve matched wrongly, never the right name."""
    __tracebackhide__ = True
    if question not in DIAGNOSES:
        raise KeyError(f"no diagnosis {question!r}; known: {', '.join(sorted(DIAGNOSES))}")
    d = DIAGNOSES[question]
    letters, names = ", ".join(sorted(d.correct)), sorted(set(d.correct.values()))
    if not isinstance(answer, dict):
        raise AssertionError(f"Question '{d.title}': set `answer` to a dict {{curve: variant}} for the curves "
                             f"{letters} first.")
    given = {str(k).strip().upper(): str(v).strip() for k, v in answer.items()}
    if sorted(given) != sorted(d.correct) or not set(given.values()) <= set(names):
        raise AssertionError(f"Question '{d.title}': name one of {', '.join(names)} for each of the curves {letters}.")
    wrong = [c for c in sorted(d.correct) if given[c] != d.correct[c]]
    if not wrong:
        report_passed(task, f"{d.title}: {d.why}")
        return
    raise AssertionError(f"Question '{d.title}': not yet. " + " ".join(d.pointers[c] for c in wrong))


def _run_records(runs: Any, variant: str, title: str, seeds: int = 3) -> tuple[list[dict[str, Any]], list[int]]:
    """The learner's run records, checked: the baseline and ``variant`` with the same ``seeds`` seeds each."""
    from ..ablations import MODEL_FIELDS, TRAINING_FIELDS, VARIANTS

    if runs is None or variant is None:
        raise AssertionError(f"Question '{title}': choose `VARIANT` and run it first (`variant_runs` is None).")
    if variant not in VARIANTS or variant == "baseline":
        raise AssertionError(f"Question '{title}': VARIANT = {variant!r} is not a variant to compare with the "
                             f"baseline; choose one of {', '.join(v for v in VARIANTS if v != 'baseline')}.")
    needed = {"variant", "seed", "ppl", "bleu", "diverged", "settings", "config", "steps"}
    if not isinstance(runs, (list, tuple)) or not all(isinstance(r, dict) and needed <= set(r) for r in runs):
        raise AssertionError(f"Question '{title}': `runs` should be the list of the records that run_ablation "
                             "returned, as it returned them.")
    by = {name: sorted(r["seed"] for r in runs if r["variant"] == name) for name in ("baseline", variant)}
    if len(set(by[variant])) != seeds or len(by[variant]) != seeds or by[variant] != by["baseline"] or \
            {r["variant"] for r in runs} != {"baseline", variant}:
        raise AssertionError(f"Question '{title}': a paired comparison needs the baseline and {variant}, and "
                             f"nothing else, on the same {seeds} seeds, once each; the baseline ran seeds "
                             f"{by['baseline']}, {variant} seeds {by[variant]}.")
    if len({r["steps"] for r in runs if not r["diverged"]}) > 1:
        raise AssertionError(f"Question '{title}': the runs trained for different numbers of steps; run every "
                             "job at the same size.")
    base = next(r for r in runs if r["variant"] == "baseline")
    for r in runs:
        fields = set(r["settings"]) if isinstance(r["settings"], dict) else set()
        changed = {k for k in MODEL_FIELDS if r["config"].get(k) != base["config"].get(k)}
        changed |= {k for k in TRAINING_FIELDS if r.get("training", {}).get(k) != base.get("training", {}).get(k)}
        if (r["variant"] == "baseline" and changed) or (r["variant"] == variant and changed != fields):
            raise AssertionError(f"Question '{title}': the run of {r['variant']}, seed {r['seed']}, changes "
                                 f"{', '.join(sorted(changed))} against the baseline, which is not what "
                                 f"{r['variant']} changes: run every job with run_ablation(name, seed, SIZE, data).")
    return list(runs), by["baseline"]


def _interval(result: Any, text: str, title: str) -> tuple[float, float, float]:
    if isinstance(result, dict) and result.get("mean") is not None and result.get("ci") is not None:
        return float(result["mean"]), float(result["ci"][0]), float(result["ci"][1])
    if isinstance(result, (tuple, list)) and len(result) == 3 and all(_is_number(x) for x in result):
        return float(result[0]), float(result[1]), float(result[2])
    raise AssertionError(f"Question '{title}': set `{text}` to the paired interval (mean, low, high) of your runs, "
                         f"got {result!r}.")


@isolated
def check_ablation_runs(runs: Any, variant: str, ppl: Any, bleu: Any, *, task: int | str | None = None) -> None:
    """Check exercise 10's experiment: ``runs`` (run_ablation's records of the baseline and ``variant``, the same
    three seeds) and the paired intervals ``ppl`` (log ratio) and ``bleu`` (points), ``(mean, low, high)`` or
    what ``ablation_stats.paired_difference`` returns, recomputed here from those records."""
    __tracebackhide__ = True
    from ..ablation_stats import paired_difference

    title = "your experiment"
    runs, seeds = _run_records(runs, variant, title)
    for metric, given in (("ppl", ppl), ("bleu", bleu)):
        mean, low, high = _interval(given, metric, title)
        truth = paired_difference(runs, variant, "baseline", metric)
        if truth["ci"] is None:
            raise AssertionError(f"Question '{title}': {variant} diverged on too many seeds for an interval of "
                                 f"{metric}; choose another variant, or say so in your sentences.")
        want = (truth["mean"], *truth["ci"])
        if not all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) for a, b in zip((mean, low, high), want)):
            raise AssertionError(f"Question '{title}': not yet. Your {metric} interval, mean {mean:.4g} in "
                                 f"[{low:.4g}, {high:.4g}], is not the one your runs give. Compute it from the "
                                 "records of this run, paired seed by seed (for perplexity, the differences of "
                                 "the logarithms), with Student's t at n - 1 degrees of freedom.")
    report_passed(task, f"your experiment: {variant} against the baseline on seeds {seeds}, the paired intervals "
                        "recomputed from your runs")


def _verdict(result: dict[str, Any], metric: str) -> str:
    """'better', 'worse' or 'inconclusive': where the paired interval of ``metric`` lies with respect to 0."""
    low, high = result["ci"]
    up = low > 0  # the variant's figure is higher than the baseline's on every plausible value
    return "inconclusive" if low <= 0 <= high else ("worse" if up else "better") if metric == "ppl" else \
        ("better" if up else "worse")


@isolated
def check_ablation_verdicts(runs: Any, variant: str, verdicts: Any, *, task: int | str | None = None) -> None:
    """Check ``verdicts``, ``{"ppl": ..., "bleu": ...}``, each "better", "worse" or "inconclusive" for ``variant``:
    what the paired interval of ``runs`` says, on the side of 0 where it lies."""
    __tracebackhide__ = True
    from ..ablation_stats import paired_difference

    title = "your verdicts"
    runs, _ = _run_records(runs, variant, title)
    if not isinstance(verdicts, dict) or sorted(verdicts) != ["bleu", "ppl"]:
        raise AssertionError(f"Question '{title}': set `verdicts` to a dict with the keys 'ppl' and 'bleu', each "
                             f"'better', 'worse' or 'inconclusive'; got {verdicts!r}.")
    lines = []
    for metric in ("ppl", "bleu"):
        given = str(verdicts[metric]).strip().lower()
        if given not in ("better", "worse", "inconclusive"):
            raise AssertionError(f"Question '{title}': verdicts[{metric!r}] = {verdicts[metric]!r}; say 'better', "
                                 "'worse' or 'inconclusive'.")
        result = paired_difference(runs, variant, "baseline", metric)
        if result["ci"] is None:
            raise AssertionError(f"Question '{title}': no interval for {metric}: {variant} diverged on too many "
                                 "seeds.")
        right = _verdict(result, metric)
        if given != right:
            scale = "a log ratio of perplexities, where lower is better" if metric == "ppl" else \
                "BLEU points, where higher is better"
            raise AssertionError(f"Question '{title}': verdicts[{metric!r}] = {given!r}: not yet. Read the "
                                 f"interval, not the mean: does it hold 0, and if not, on which side of 0 does it "
                                 f"lie? It is {scale}.")
        lines.append(f"{metric} {right}")
    report_passed(task, f"your verdicts follow from the intervals: {', '.join(lines)}")
