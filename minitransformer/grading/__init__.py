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

# The package, one module per part: _common.py (helpers shared by the checks), attention_checks.py
# (exercises 02, 03, 06), layer_checks.py (04, 05), decoding_checks.py (06, 07), generate.py (exercises
# and reference from the solutions; nbgrader_plugin.py makes `nbgrader generate_assignment` write the same
# exercises, and imports nbgrader, which nothing else here needs), notebooks.py (grading one notebook), classroom.py (a folder, the command), _sandbox.py
# (the bubblewrap sandbox and its package copy), _runner.py (the learner's side, in the sandbox), _remote.py (the
# grader's side: the checks, with proxies of the learner's code), _protocol.py (their messages); __main__.py runs
# the command.

from __future__ import annotations

from .attention_checks import (check_causal_mask, check_logsumexp, check_padding_mask, check_positional_encoding,
                               check_scaled_dot_product_attention, check_stable_softmax)
from .decoding_checks import check_greedy_decode, check_label_smoothing_target, check_target_mask
from .layer_checks import check_encoder_layer, check_feed_forward, check_layer_norm, check_multi_head_attention
# The checks of the tasks added lesson by lesson (00, 01, 08, and the new tasks of 02, 04, 06, 07).
from .bpe_checks import check_bpe_merges
from .decoder_checks import check_decoder_layer, check_shifted_target
from .embedding_checks import (check_one_hot_embedding, check_scaled_embedding, check_skipgram_gradients,
                               check_tied_output)
from .head_checks import check_split_and_merge_heads
from .intro_checks import check_additive_scores, check_alignment_and_context, check_layers_to_connect
from .position_checks import check_offset_rotation
from .question_checks import check_answer
from .recipe_checks import (check_ablation_prediction, check_constant_schedule, check_learned_positions,
                            check_no_warmup_schedule)
from .training_checks import check_token_batches, check_warmup_schedule
from .translation_checks import (check_beam_search, check_beam_step, check_checkpoint_average, check_corpus_bleu,
                                 check_normalised_scores)
from .classroom import grade_all, main
from .notebooks import Report, TaskResult, grade_notebook, load_references
from .variant_checks import (check_decoder_only_logits, check_family_choice, check_masked_mean,
                             check_next_token_probabilities)

__all__ = [
    "Report",
    "TaskResult",
    "check_ablation_prediction",
    "check_additive_scores",
    "check_alignment_and_context",
    "check_answer",
    "check_beam_search",
    "check_beam_step",
    "check_bpe_merges",
    "check_causal_mask",
    "check_checkpoint_average",
    "check_constant_schedule",
    "check_corpus_bleu",
    "check_decoder_layer",
    "check_decoder_only_logits",
    "check_encoder_layer",
    "check_family_choice",
    "check_feed_forward",
    "check_greedy_decode",
    "check_label_smoothing_target",
    "check_layer_norm",
    "check_layers_to_connect",
    "check_learned_positions",
    "check_logsumexp",
    "check_masked_mean",
    "check_multi_head_attention",
    "check_next_token_probabilities",
    "check_no_warmup_schedule",
    "check_normalised_scores",
    "check_offset_rotation",
    "check_one_hot_embedding",
    "check_padding_mask",
    "check_positional_encoding",
    "check_scaled_dot_product_attention",
    "check_scaled_embedding",
    "check_shifted_target",
    "check_skipgram_gradients",
    "check_split_and_merge_heads",
    "check_stable_softmax",
    "check_target_mask",
    "check_tied_output",
    "check_token_batches",
    "check_warmup_schedule",
    "grade_all",
    "grade_notebook",
    "load_references",
    "main",
]
