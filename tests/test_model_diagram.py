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


def _labelled_boxes(ax) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(label, (x0, y0, x1, y1)) of every block box (the dashed layer stacks left out): its first text."""
    boxes = [p.get_bbox() for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_linestyle() == "solid"]
    found = []
    for box in boxes:
        inside = [t.get_text() for t in ax.texts if box.contains(*t.get_position())]
        found.append((inside[0], (box.x0, box.y0, box.x1, box.y1)))
    return found


def test_a_residual_connection_goes_around_every_sublayer() -> None:
    # The paper's Figure 1 carries x around each sub-layer into its "Add & Norm"; a diagram without those
    # arrows shows the block without its residual (self-attention -> norm -> feed-forward), a common mistake.
    from matplotlib.patches import FancyArrowPatch

    for config in (TransformerConfig.base(37000), TransformerConfig.tiny(100)):
        ax = plot_model_diagram(config)
        boxes = _labelled_boxes(ax)
        arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_gid() == "residual"]
        paths = [line for line in ax.lines if line.get_gid() == "residual" and len(line.get_xdata()) == 3]
        assert len(arrows) == len(paths) == 2 + 3  # encoder: attention, FFN; decoder: self-, cross-attention, FFN
        around = []
        for line in paths:
            (x, bypass, _), (y_from, _, y_norm) = line.get_xdata(), line.get_ydata()
            norm = [label for label, (x0, y0, x1, y1) in boxes if x0 <= x <= x1 and y0 <= y_norm <= y1]
            assert norm == ["add & norm: LayerNorm(x + sublayer(x))"], (y_norm, norm)
            between = [(label, (x0, x1)) for label, (x0, y0, x1, y1) in boxes
                       if x0 <= x <= x1 and y_from < y0 and y1 < y_norm]
            assert len(between) == 1, between  # exactly one box is bypassed: the sub-layer
            label, (x0, x1) = between[0]
            assert not x0 <= bypass <= x1  # the connection passes beside the sub-layer, not through it
            # It leaves from the arrow that brings the sub-layer its input, from the box below.
            assert any(bx0 <= x <= bx1 and y1 < y_from for _, (bx0, _, bx1, y1) in boxes)
            around.append("feed-forward" if label.startswith("feed-forward") else label.split(",")[0].split(":")[0])
        plt.close(ax.figure)
        assert sorted(around) == sorted(["multi-head self-attention", "feed-forward",  # encoder
                                         "masked multi-head self-attention", "cross-attention", "feed-forward"])
