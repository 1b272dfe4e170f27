"""The checks of the exercises: the feedback an exercise notebook prints under each task.

Every task of an exercise notebook (``exercises/``) ends with a check cell such as
``check_scaled_dot_product_attention(my_attention, task=2)``. The check runs your code on random
inputs and edge cases, compares it with the package's own implementation, and either prints
``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says what was expected, what your
code gave and, for the usual mistakes, what probably went wrong.

One module per exercise (``lesson00`` ... ``lesson10``, ``capstone`` for exercise 11), the conceptual
questions of every exercise (:mod:`.questions`) and the helpers they share (:mod:`.compare`). The checks draw their inputs from
their own seeded generator and leave the global random state untouched, so calling one does not
change what the rest of a notebook computes. The instructor's grader (the ``minitransformer-grader``
distribution, ``grader/`` in the repository) runs these same functions on submitted notebooks.
"""

from __future__ import annotations

from .capstone import (check_capstone_loss, check_capstone_model, check_capstone_run, check_capstone_training,
                       check_initial_loss, check_overfit_one_batch)
from .debugging import (check_fault, check_fixed_attention, check_fixed_bleu, check_fixed_encoder_layer,
                        check_fixed_lm_loss, check_fixed_multi_head, check_fixed_paired_interval,
                        check_fixed_positional_encoding, check_fixed_skipgram_step, check_fixed_smoothed_loss,
                        check_fixed_teacher_forcing)
from .lesson00 import check_additive_scores, check_alignment_and_context, check_layers_to_connect
from .lesson01 import (check_bpe_merges, check_one_hot_embedding, check_scaled_embedding, check_skipgram_gradients,
                       check_tied_output)
from .lesson02 import check_offset_rotation, check_positional_encoding
from .lesson03 import check_logsumexp, check_padding_mask, check_scaled_dot_product_attention, check_stable_softmax
from .lesson04 import check_multi_head_attention, check_split_and_merge_heads
from .lesson05 import check_encoder_layer, check_feed_forward, check_layer_norm
from .lesson06 import (check_causal_mask, check_decoder_layer, check_greedy_decode, check_shifted_target,
                       check_target_mask)
from .lesson07 import check_label_smoothing_target, check_token_batches, check_warmup_schedule
from .lesson08 import (check_beam_search, check_beam_step, check_checkpoint_average, check_corpus_bleu,
                       check_normalised_scores)
from .lesson09 import check_decoder_only_logits, check_family_choice, check_masked_mean, check_next_token_probabilities
from .lesson10 import (check_ablation_prediction, check_constant_schedule, check_learned_positions,
                       check_no_warmup_schedule)
from .questions import (check_ablation_runs, check_ablation_verdicts, check_answer, check_diagnosis,
                        check_prediction)

__all__ = [
    "check_ablation_prediction",
    "check_ablation_runs",
    "check_ablation_verdicts",
    "check_additive_scores",
    "check_alignment_and_context",
    "check_answer",
    "check_beam_search",
    "check_beam_step",
    "check_bpe_merges",
    "check_capstone_loss",
    "check_capstone_model",
    "check_capstone_run",
    "check_capstone_training",
    "check_causal_mask",
    "check_checkpoint_average",
    "check_constant_schedule",
    "check_corpus_bleu",
    "check_decoder_layer",
    "check_decoder_only_logits",
    "check_diagnosis",
    "check_encoder_layer",
    "check_family_choice",
    "check_fault",
    "check_feed_forward",
    "check_fixed_attention",
    "check_fixed_bleu",
    "check_fixed_encoder_layer",
    "check_fixed_lm_loss",
    "check_fixed_multi_head",
    "check_fixed_paired_interval",
    "check_fixed_positional_encoding",
    "check_fixed_skipgram_step",
    "check_fixed_smoothed_loss",
    "check_fixed_teacher_forcing",
    "check_greedy_decode",
    "check_initial_loss",
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
    "check_overfit_one_batch",
    "check_padding_mask",
    "check_positional_encoding",
    "check_prediction",
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
]
