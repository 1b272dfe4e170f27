"""Live controls for the lessons: one small computed view per idea, drawn for any setting.

Each lesson's view is a pair: a function that computes what the view shows (it returns
tensors in a small dataclass, and is tested) and a ``draw_...(fig, **settings)`` function that
draws it into a Matplotlib figure. :mod:`~minitransformer.playground.controls` turns a draw function
into a figure (:func:`plot_view`), into panels for 2-3 chosen values (:func:`static_panels`, for the
stored notebook and the website) or into ipywidgets controls (:func:`live`)::

    from minitransformer.playground import draw_softmax_saturation, live, static_panels

    static_panels(draw_softmax_saturation, "scaled", [False, True], d_k=256)
    live(draw_softmax_saturation, d_k=[1, 4, 16, 64, 256, 1024], scaled=True)

Every view computes in a fraction of a second on a CPU, and every random draw is seeded
(a ``seed`` argument) without touching PyTorch's global generator.

The views, by lesson (compute, then draw):

* 01: :func:`embedding_scale`, :func:`draw_embedding_scale`
* 02: :func:`positional_table`, :func:`draw_positional_table`; :func:`offset_rotation`, :func:`draw_offset_rotation`
* 03: :func:`softmax_saturation`, :func:`draw_softmax_saturation`; :func:`masked_attention`,
  :func:`draw_masked_attention`
* 04: :func:`head_patterns`, :func:`draw_head_patterns`
* 05: :func:`layer_gradients`, :func:`draw_layer_gradients`
* 07: :func:`smoothed_target`, :func:`draw_smoothed_target`; :func:`warmup_schedule`, :func:`draw_warmup_schedule`
* 08: :func:`beam_hypotheses`, :func:`sentence_beams`, :func:`draw_beam_search`
* 09: :func:`next_token_distribution`, :func:`draw_next_token`; :func:`sample_texts`, :func:`draw_sampling`
* 10: :func:`compare_variants`, :func:`draw_variant_comparison`
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
