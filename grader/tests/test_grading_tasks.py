"""The grader's score of single tasks: the solution gets a task's full points, the blank exercise none.

The checks of these tasks are tested without the grader: tests/test_checks_bpe.py (exercise 01's BPE merges)
and tests/test_checks_logsumexp.py (exercise 03's task 4, the softmax that does not overflow).
"""

from __future__ import annotations

from pathlib import Path

from minitransformer_grader import grade_notebook
from minitransformer_grader.notebooks import load_references

ROOT = Path(__file__).resolve().parents[2]


def test_the_solution_scores_full_and_the_blank_exercise_zero_on_the_bpe_task() -> None:
    for folder, expected in (("solutions", 1.0), ("exercises", 0.0)):
        report = grade_notebook(ROOT / folder / "01_embeddings.ipynb", exercise="01_embeddings", timeout=300)
        task = next(t for t in report.tasks if t.title == "BPE merges")
        assert task.points > 0 and task.score == expected * task.points, (folder, task)


def test_the_solution_scores_full_and_the_blank_exercise_zero_on_task_4() -> None:
    for folder, expected in (("solutions", 1.0), ("exercises", 0.0)):
        report = grade_notebook(ROOT / folder / "03_self_attention.ipynb", exercise="03_self_attention", timeout=300)
        task = next(t for t in report.tasks if t.grade_id == "task-4")
        assert task.points == 2 and task.score == expected * task.points, (folder, task)
        assert report.max_score == sum(t["points"] for t in load_references()["03_self_attention"]["tasks"]), \
            report.table()
