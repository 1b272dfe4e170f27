"""plot_model_diagram draws every block of the model, its lesson, and the shapes of the given config."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from minitransformer import TransformerConfig  # noqa: E402
from minitransformer.plotting import plot_model_diagram  # noqa: E402


def _texts(config: TransformerConfig) -> tuple[list[str], int]:
    ax = plot_model_diagram(config)
    texts = [t.get_text() for t in ax.texts]
    boxes = sum(isinstance(p, FancyBboxPatch) for p in ax.patches)
    plt.close(ax.figure)
    return texts, boxes


def test_the_base_model_has_its_boxes_lessons_and_shapes() -> None:
    texts, boxes = _texts(TransformerConfig.base(37000))
    assert boxes == 7 + 11 + 2  # 7 encoder boxes, 11 decoder boxes, 2 dashed layer stacks
    for label in ("multi-head self-attention, 8 heads", "masked multi-head self-attention",
                  "cross-attention: Q from here", "feed-forward 512 -> 2048 -> 512", "linear 512 -> 37,000",
                  "softmax: next-token probabilities", "+ positional encoding", "token embedding x sqrt(512)"):
        assert label in texts, label
    for lesson in ("lesson 01", "lesson 02", "lessons 03, 04: d_k = 64, padding mask", "lesson 05",
                   "lesson 06: causal mask", "encoder layer, x 6 (lesson 05)", "decoder layer, x 6 (lesson 06)"):
        assert lesson in texts, lesson
    assert {"(B, S)", "(B, T)", "(B, S, 512)", "(B, T, 512)", "(B, T, 37000)", "memory (B, S, 512)"} <= set(texts)
    assert texts.count("add & norm: LayerNorm(x + sublayer(x))") == 2 + 3


def test_the_shapes_follow_the_config() -> None:
    texts, _ = _texts(TransformerConfig.tiny(100))
    config = TransformerConfig.tiny(100)
    assert f"(B, T, {config.d_model})" in texts and "(B, T, 100)" in texts
    assert "(B, S, 512)" not in texts
    assert f"encoder layer, x {config.n_encoder_layers} (lesson 05)" in texts
