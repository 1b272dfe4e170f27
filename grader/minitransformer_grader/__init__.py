"""Automatic checks for the exercises, and the command that grades them.

For learners: every task of an exercise notebook (``exercises/``) ends with a check cell such as
``check_scaled_dot_product_attention(my_attention, task=2)``. The check runs your code on random
inputs and edge cases, compares it with the package's own implementation, and either prints
``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says what was expected, what your
code gave and, for the usual mistakes, what probably went wrong.

For instructors: ``python -m minitransformer.grading grade FOLDER`` runs the code of each submitted
notebook in a bubblewrap sandbox, runs the package's own check cells of its exercise (hidden tests
included) in the grader's process against that code, and writes grades.json, grades.csv and
grades_feedback.csv into a grades/ folder beside FOLDER (see docs/what_is_safe.md).
``python -m minitransformer.grading make-exercises`` generates exercises/ from solutions/.

The checks draw their inputs from their own seeded generator and leave the global random state
untouched, so calling one does not change what the rest of a notebook computes.
"""

# The package, one module per part: checks.py (every check function, by name) gathers the checks of
# attention_checks.py (exercises 02, 03, 06), layer_checks.py (04, 05), decoding_checks.py (06, 07) and the
# other *_checks.py, with _common.py (helpers shared by the checks); generate.py (exercises and reference
# from the solutions; nbgrader_plugin.py makes `nbgrader generate_assignment` write the same exercises, and
# imports nbgrader, which nothing else here needs), notebooks.py (grading one notebook), classroom.py (a
# folder, the command), _submission.py (one submission from start to end), _sandbox.py (the bubblewrap
# sandbox and its package copy), _runner.py (the learner's side, in the sandbox), _remote.py (the grader's
# side: the checks, with proxies of the learner's code), _protocol.py (their messages); __main__.py runs the
# command. The imports between them form no circle (tests/test_package_structure.py).

from __future__ import annotations

from . import checks
from .checks import *  # every check_* function of the exercises, the ones checks.__all__ lists
from .classroom import grade_all, main
from .notebooks import Report, TaskResult, grade_notebook, load_references

__all__ = ["Report", "TaskResult", "grade_all", "grade_notebook", "load_references", "main"]
__all__ += checks.__all__
__all__.sort()
