"""Automatic checks for the exercises, and the command that grades them.

For learners: every task of an exercise notebook (``exercises/``) ends with a check cell such as
``check_scaled_dot_product_attention(my_attention, task=2)``. The check runs your code on random
inputs and edge cases, compares it with the package's own implementation, and either prints
``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says what was expected, what your
code gave and, for the usual mistakes, what probably went wrong.

For instructors: ``python -m minitransformer.grading SUBMISSION.ipynb [FOLDER ...] [--json out.json]``
runs each notebook in a fresh kernel, restores the check cells from the original exercise, and
prints one table per submission (task, points, passed, message) and the totals.

The checks draw their inputs from their own seeded generator and leave the global random state
untouched, so calling one does not change what the rest of a notebook computes.
"""

# The package, one module per part: _common.py (helpers shared by the checks), attention_checks.py
# (exercises 01), layer_checks.py (exercises 02), decoding_checks.py (exercises 03) and notebooks.py
# (grading whole notebooks, the command); __main__.py runs the command.

from __future__ import annotations

from .attention_checks import (check_causal_mask, check_padding_mask, check_positional_encoding,
                               check_scaled_dot_product_attention)
from .decoding_checks import check_greedy_decode, check_label_smoothing_target, check_target_mask
from .layer_checks import check_encoder_layer, check_feed_forward, check_layer_norm, check_multi_head_attention
from .variant_checks import (check_decoder_only_logits, check_family_choice, check_masked_mean,
                             check_next_token_probabilities)
# COURSE_EXERCISES stays importable from here, as before, though not in __all__.
from .notebooks import COURSE_EXERCISES, Report, TaskResult, grade_notebook, main  # noqa: F401

__all__ = [
    "Report",
    "TaskResult",
    "check_causal_mask",
    "check_decoder_only_logits",
    "check_family_choice",
    "check_masked_mean",
    "check_next_token_probabilities",
    "check_encoder_layer",
    "check_feed_forward",
    "check_greedy_decode",
    "check_label_smoothing_target",
    "check_layer_norm",
    "check_multi_head_attention",
    "check_padding_mask",
    "check_positional_encoding",
    "check_scaled_dot_product_attention",
    "check_target_mask",
    "grade_notebook",
    "main",
]
