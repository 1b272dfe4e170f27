"""The instructor's grader of the course's exercises: ``python -m minitransformer_grader grade FOLDER``.

``python -m minitransformer_grader grade FOLDER`` (or ``python -m minitransformer grade FOLDER``,
found through this distribution's entry point) runs the code of each submitted notebook in a
bubblewrap sandbox, runs the check cells of its exercise (hidden tests included, from the grader's
reference) in the grader's process against that code, and writes grades.json, grades.csv and
grades_feedback.csv into a grades/ folder beside FOLDER (see docs/what_is_safe.md).
``python -m minitransformer_grader make-exercises`` generates exercises/ from solutions/.

The checks themselves are the learner's (:mod:`minitransformer.checks`): the same functions print
the feedback in an exercise notebook and score a submission here.
"""

# One module per part: generate.py (exercises and reference from the solutions; nbgrader_plugin.py makes
# `nbgrader generate_assignment` write the same exercises, and imports nbgrader, which nothing else here
# needs), notebooks.py (grading one notebook), classroom.py (a folder, the command), submission.py (one
# submission from start to end), sandbox.py (the bubblewrap sandbox and its package copy), limits.py (memory
# and process limits), runner.py (the learner's side, in the sandbox), remote.py (the grader's side: the
# checks, with proxies of the learner's code), protocol.py (their messages), scan.py (the submitted source
# searched for the pieces a task forbids); __main__.py runs the command. The imports between them form no
# circle (tests/test_package_structure.py).

from __future__ import annotations

from .classroom import grade_all, main
from .notebooks import Report, TaskResult, grade_notebook, load_references

__all__ = ["Report", "TaskResult", "grade_all", "grade_notebook", "load_references", "main"]
