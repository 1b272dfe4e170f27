"""The example class of examples/class/: what exercises/README.md tells an instructor to grade first.

Its three submissions of exercise 03 (blank, partly done, worked solution) are generated from the solution by
``make-exercises``, and grading them writes the committed grades.csv and grades_feedback.csv, byte for byte.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from minitransformer_grader.generate import EXAMPLE_CLASS, make_exercises

ROOT = Path(__file__).resolve().parents[2]
CLASS = ROOT / "examples" / "class"


def test_the_example_submissions_are_what_make_exercises_generates(tmp_path):
    stale = make_exercises(ROOT / "solutions", tmp_path / "exercises", tmp_path / "reference",
                           example=CLASS / "submitted", check=True)
    stale = [s for s in stale if s.startswith(str(CLASS))]
    assert stale == [], "run `python -m minitransformer_grader make-exercises`: " + ", ".join(stale)
    students = sorted(p.name for p in (CLASS / "submitted").iterdir())
    assert students == sorted(EXAMPLE_CLASS) == ["blank", "partly-done", "worked-solution"]


def test_grading_the_example_class_writes_the_committed_grades(tmp_path):
    # The command of exercises/README.md, from the repository's root; --out keeps the committed files untouched.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "minitransformer", "grade", "examples/class/submitted", "--jobs", "2",
                          "--out", str(tmp_path), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("grades.csv", "grades_feedback.csv"):
        written = (tmp_path / name).read_text(encoding="utf-8")
        committed = (CLASS / "grades" / name).read_text(encoding="utf-8")
        assert written == committed, (f"examples/class/grades/{name} is out of date: run `python -m minitransformer "
                                      f"grade examples/class/submitted` from the repository's root\n{written}")
    totals = [line.split(",")[-3:-1] for line in (tmp_path / "grades.csv").read_text().splitlines()[1:]]
    assert totals == [["0", "12"], ["5", "12"], ["12", "12"]]  # blank, partly done, worked solution
