"""Live controls for the lessons: a function computes a view's numbers, a ``draw_...(fig, **settings)`` draws them.

    static_panels(draw_softmax_saturation, "scaled", [False, True], d_k=256)  # stored figure, 2-3 settings
    live(draw_softmax_saturation, d_k=[1, 4, 16, 64, 256, 1024], scaled=True)  # ipywidgets controls

Each view computes in a fraction of a second on a CPU; random draws are seeded without touching
PyTorch's global generator.
"""

from .attention import (
    D_K_VALUES,
    MaskedAttention,
    SoftmaxSaturation,
    draw_masked_attention,
    draw_softmax_saturation,
    masked_attention,
    softmax_saturation,
)
from .controls import Fixed, figure_size, fixed, live, options_from, plot_view, static_panels
from .decoding import (
    BeamHypotheses,
    Hypothesis,
    beam_hypotheses,
    draw_beam_search,
    sentence_beams,
)
from .depth import LayerGradients, draw_layer_gradients, layer_gradients
from .embeddings import (
    EMBEDDING_INITS,
    EmbeddingScale,
    draw_embedding_scale,
    embedding_scale,
)
from .heads import HeadPatterns, draw_head_patterns, head_patterns
from .positional import (
    OffsetRotation,
    PositionalTable,
    draw_offset_rotation,
    draw_positional_table,
    offset_rotation,
    positional_table,
)
from .recipe import (
    VariantComparison,
    ablation_variants,
    compare_variants,
    draw_variant_comparison,
)
from .sampling import (
    NextTokenDistribution,
    draw_next_token,
    draw_sampling,
    lm_next_token_logits,
    next_token_distribution,
    sample_texts,
)
from .training import (
    SmoothedTarget,
    WarmupSchedule,
    draw_smoothed_target,
    draw_warmup_schedule,
    smoothed_target,
    warmup_schedule,
)

__all__ = [
    "D_K_VALUES",
    "EMBEDDING_INITS",
    "BeamHypotheses",
    "EmbeddingScale",
    "Fixed",
    "HeadPatterns",
    "Hypothesis",
    "LayerGradients",
    "MaskedAttention",
    "NextTokenDistribution",
    "OffsetRotation",
    "PositionalTable",
    "SmoothedTarget",
    "SoftmaxSaturation",
    "VariantComparison",
    "WarmupSchedule",
    "ablation_variants",
    "beam_hypotheses",
    "compare_variants",
    "draw_beam_search",
    "draw_embedding_scale",
    "draw_head_patterns",
    "draw_layer_gradients",
    "draw_masked_attention",
    "draw_next_token",
    "draw_offset_rotation",
    "draw_positional_table",
    "draw_sampling",
    "draw_smoothed_target",
    "draw_softmax_saturation",
    "draw_variant_comparison",
    "draw_warmup_schedule",
    "embedding_scale",
    "figure_size",
    "fixed",
    "head_patterns",
    "layer_gradients",
    "live",
    "lm_next_token_logits",
    "masked_attention",
    "next_token_distribution",
    "offset_rotation",
    "options_from",
    "plot_view",
    "positional_table",
    "sample_texts",
    "sentence_beams",
    "smoothed_target",
    "softmax_saturation",
    "static_panels",
    "warmup_schedule",
]
