"""Every check function of the exercises, by name: the table the grader runs check cells with.

One module per lesson's checks (``attention_checks.py``...) defines them; this module gathers them, so
that ``minitransformer.grading`` re-exports them for the exercise notebooks and the grader
(:mod:`._submission`, :mod:`.notebooks`) finds the genuine ones without importing the package's
``__init__`` (which imports the grader: that was an import circle).
"""

from __future__ import annotations

from typing import Any

from .attention_checks import (
    check_causal_mask,
    check_logsumexp,
    check_padding_mask,
    check_positional_encoding,
    check_scaled_dot_product_attention,
    check_stable_softmax,
)

# The checks of the tasks added lesson by lesson (00, 01, 08, and the new tasks of 02, 04, 06, 07).
from .bpe_checks import check_bpe_merges
from .decoder_checks import check_decoder_layer, check_shifted_target
from .decoding_checks import (
    check_greedy_decode,
    check_label_smoothing_target,
    check_target_mask,
)
from .embedding_checks import (
    check_one_hot_embedding,
    check_scaled_embedding,
    check_skipgram_gradients,
    check_tied_output,
)
from .head_checks import check_split_and_merge_heads
from .intro_checks import (
    check_additive_scores,
    check_alignment_and_context,
    check_layers_to_connect,
)
from .layer_checks import (
    check_encoder_layer,
    check_feed_forward,
    check_layer_norm,
    check_multi_head_attention,
)
from .position_checks import check_offset_rotation
from .question_checks import check_answer
from .recipe_checks import (
    check_ablation_prediction,
    check_constant_schedule,
    check_learned_positions,
    check_no_warmup_schedule,
)
from .training_checks import check_token_batches, check_warmup_schedule
from .translation_checks import (
    check_beam_search,
    check_beam_step,
    check_checkpoint_average,
    check_corpus_bleu,
    check_normalised_scores,
)
from .variant_checks import (
    check_decoder_only_logits,
    check_family_choice,
    check_masked_mean,
    check_next_token_probabilities,
)

__all__ = [
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
]


def check_functions() -> dict[str, Any]:
    """The genuine check functions, from the grader's own package: ``{"check_...": function}``."""
    return {name: globals()[name] for name in __all__}
