"""The questions that no cell answers, the predictions before an experiment, and exercise 10's diagnosis and experiment.

Each question passes its right answer (within its tolerance), and a wrong answer gets "not yet" with a
pointer that never gives the answer away; an experiment cell refuses to run without a prediction; the
experiment's checks recompute the intervals from the learner's own run records.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from minitransformer.ablation_stats import paired_difference
from minitransformer.ablations import SIZES, job_settings, variant
from minitransformer.checks import (
    check_ablation_runs,
    check_ablation_verdicts,
    check_answer,
    check_diagnosis,
    check_prediction,
)
from minitransformer.checks.questions import DIAGNOSES, QUESTIONS, PredictionMissing

ROOT = Path(__file__).resolve().parents[1]

#: The questions of issue 43's item 3, with their right answer as a learner would type it, and wrong ones.
REASONING = {
    "01-tied-gradient": ("d", ["A", "B", "C", "E"]),
    "01-embedding-length": ((1.0, 512.0), [(1, 22.627), (512, 512), (0, 0)]),
    "02-pe-lengths": ((256, "b"), [(512, "B"), (256, "A"), (256, "C"), (256, "D")]),
    "03-unscaled-entropy": ("B", ["A", "C", "D"]),
    "03-score-spread": ((8.0, 2.0), [(64, 16), (4, 1), (8, 1), (16, 4)]),
    "04-heads-parameters": ((1050624, 1050624), [(1048576, 1048576), (1050624, 131328), (4, 4)]),
    "05-layer-norm-output": ((2, 3), [(0, 1), (3, 2), (2, 9)]),
    "06-which-masks-see-ahead": ({"B", "C", "E"}, ["B", "BC", "BE", "BCDE", "AD", "ACE"]),
    "06-greedy-cost": ((10, 55, 10), [(10, 10, 10), (10, 100, 10), (10, 55, 55)]),
    "07-smoothing-floor": (0.565, [2.0, 0, 0.1, 1.0]),
    "07-schedule-scaling": ([0.5, 0.707], [(0.25, 0.5), (0.5, 1.4142), (0.5, 1.0)]),
    "08-length-penalty": (("a", "b", "b"), [("A", "A", "B"), ("A", "A", "A"), ("B", "B", "B")]),
    "09-temperature-limits": ((1, 0.2, 0), [(0.2, 1, 0), (1, 0.05, 0), (1, 0.2, 0.05)]),
}


def _shown(correct) -> list[str]:
    """The ways the right answer could be written in a message."""
    if isinstance(correct, frozenset):
        return ["".join(sorted(correct)), repr(set(correct))]
    return [repr(correct)]


@pytest.mark.parametrize("key", sorted(REASONING))
def test_a_question_passes_its_answer_and_points_to_the_idea_otherwise(key: str, capsys) -> None:
    right, wrongs = REASONING[key]
    check_answer(key, right, task=9)
    assert capsys.readouterr().out.startswith(f"✓ Task 9 passed: {QUESTIONS[key].title}: ")
    for wrong in wrongs:
        with pytest.raises(AssertionError) as info:
            check_answer(key, wrong, task=9)
        message = str(info.value)
        assert message.startswith(f"Question '{QUESTIONS[key].title}': ") and ": not yet. " in message, message
        pointer = message.split(": not yet. ", 1)[1]
        assert pointer[:1].isupper() and not pointer.startswith("Not yet")
        for shown in _shown(QUESTIONS[key].correct):
            assert shown not in pointer, (key, wrong, pointer)
    with pytest.raises(AssertionError, match=r"^Question .*set `answer`"):
        check_answer(key, None, task=9)


def test_a_numeric_answer_is_checked_within_its_tolerance() -> None:
    check_answer("07-smoothing-floor", 0.5649)
    check_answer("07-smoothing-floor", 0.57)  # 0.01 of max(1, 0.565)
    with pytest.raises(AssertionError, match="not yet"):
        check_answer("07-smoothing-floor", 0.6)
    with pytest.raises(AssertionError, match="not yet"):
        check_answer("07-smoothing-floor", float("nan"))
    with pytest.raises(AssertionError, match="not yet"):
        check_answer("04-heads-parameters", (1050625, 1050624))  # counts are exact


def test_the_worked_solutions_answer_every_new_question_and_the_exercises_leave_it_open() -> None:
    asked = set()
    for path in sorted((ROOT / "solutions").glob("[01][0-9]_*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            found = re.search(r'check_answer\("([0-9]{2}-[a-z0-9-]+)"', "".join(cell["source"]))
            if found and found.group(1) in REASONING:
                asked.add(found.group(1))
                assert cell["metadata"]["minitransformer"]["kind"] == "reason", (path.name, found.group(1))
    assert asked == set(REASONING)


def test_an_experiment_refuses_to_run_before_a_prediction(capsys) -> None:
    for empty in ("", "   ", None):
        with pytest.raises(PredictionMissing, match="Predict before you run"):
            check_prediction(empty)
    check_prediction("the loss stops near 0.58")
    assert capsys.readouterr().out == ""
    check_prediction("the loss stops near 0.58", result="loss 2.398 -> 0.579")
    assert capsys.readouterr().out == "Your prediction: the loss stops near 0.58\nWhat happened:   loss 2.398 -> 0.579\n"


def test_the_diagnosis_names_the_curves_to_look_at_again_never_their_variant(capsys) -> None:
    d = DIAGNOSES["10-four-curves"]
    check_diagnosis("10-four-curves", {k.lower(): v for k, v in d.correct.items()}, task=7)
    assert capsys.readouterr().out.startswith("✓ Task 7 passed: four training runs, unlabelled")
    swapped = dict(d.correct, W=d.correct["Y"], Y=d.correct["W"])
    with pytest.raises(AssertionError) as info:
        check_diagnosis("10-four-curves", swapped, task=7)
    message = str(info.value)
    assert "not yet" in message and "Curve W" in message and "Curve Y" in message and "Curve X" not in message
    assert d.correct["W"] not in message and d.correct["Y"] not in message
    for bad, why in ((None, "set `answer`"), ("W X Y Z", "a dict"), ({"W": "baseline"}, "each of the curves"),
                     (dict(d.correct, W="pre_ln"), "name one of baseline, dropout_0, no_scale, no_warmup")):
        with pytest.raises(AssertionError, match=re.escape(why)):
            check_diagnosis("10-four-curves", bad, task=7)


def _record(name: str, seed: int, ppl: float, bleu: float) -> dict:
    """A record shaped like run_ablation's, without training."""
    config, training = job_settings(SIZES["tiny"], name)
    return {"variant": name, "seed": seed, "settings": variant(name).settings(SIZES["tiny"]),
            "config": config.to_dict(), "training": training, "ppl": ppl, "bleu": bleu, "diverged": False,
            "steps": SIZES["tiny"].steps}


def _experiment(shift: float = 0.3) -> list[dict]:
    base = [_record("baseline", s, p, b) for s, p, b in ((0, 2.1, 30.0), (1, 1.9, 34.0), (2, 2.6, 22.0))]
    other = [_record("no_pos", s, p * (1 + shift + 0.01 * s), b - 10 - s) for s, p, b in
             ((0, 2.1, 30.0), (1, 1.9, 34.0), (2, 2.6, 22.0))]
    return base + other


def test_the_experiment_is_graded_from_its_own_records(capsys) -> None:
    runs = _experiment()
    ppl, bleu = (paired_difference(runs, "no_pos", "baseline", m) for m in ("ppl", "bleu"))
    check_ablation_runs(runs, "no_pos", ppl, bleu, task="8, part 1 of 2")
    check_ablation_verdicts(runs, "no_pos", {"ppl": "worse", "bleu": "worse"}, task="8, part 2 of 2")
    out = capsys.readouterr().out
    assert "✓ Task 8, part 1 of 2 passed" in out and "ppl worse, bleu worse" in out
    # Numbers that are not the runs' own, or a reading of the mean instead of the interval: not yet.
    forged = dict(ppl, ci=(ppl["ci"][0] - 0.01, ppl["ci"][1]))
    with pytest.raises(AssertionError, match="not the one your runs give"):
        check_ablation_runs(runs, "no_pos", forged, bleu)
    with pytest.raises(AssertionError, match="Read the interval, not the mean"):
        check_ablation_verdicts(runs, "no_pos", {"ppl": "inconclusive", "bleu": "worse"})
    noisy = _experiment(shift=0.0)
    noisy[4]["ppl"] *= 0.7  # one seed better, the others worse: an interval that holds 0
    check_ablation_verdicts(noisy, "no_pos", {"ppl": "inconclusive", "bleu": "worse"})


def test_the_experiment_must_be_paired_and_made_by_the_variant() -> None:
    runs = _experiment()
    ppl, bleu = (paired_difference(runs, "no_pos", "baseline", m) for m in ("ppl", "bleu"))
    with pytest.raises(AssertionError, match=r"^Question 'your experiment': choose `VARIANT`"):
        check_ablation_runs(None, None, None, None)
    with pytest.raises(AssertionError, match="not a variant to compare"):
        check_ablation_runs(runs, "baseline", ppl, bleu)
    with pytest.raises(AssertionError, match="same 3 seeds"):
        check_ablation_runs(runs[:5], "no_pos", ppl, bleu)
    other_seed = copy.deepcopy(runs)
    other_seed[3]["seed"] = 7
    with pytest.raises(AssertionError, match="same 3 seeds"):
        check_ablation_runs(other_seed, "no_pos", ppl, bleu)
    relabelled = copy.deepcopy(runs)
    for r in relabelled[3:]:
        r["config"] = relabelled[0]["config"]  # a baseline run renamed no_pos
    with pytest.raises(AssertionError, match="not what no_pos changes"):
        check_ablation_runs(relabelled, "no_pos", ppl, bleu)
    with pytest.raises(AssertionError, match="a dict with the keys 'ppl' and 'bleu'"):
        check_ablation_verdicts(runs, "no_pos", "worse")
