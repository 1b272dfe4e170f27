"""Lesson 10: two variants of the recipe side by side, seed by seed, from the committed ablation run.

Runs are paired by seed (same data order, same start where the shapes allow), so the difference within a
pair is the variant's effect with less noise than across pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure, SubFigure

from ..ablation_report import curves, load_results
from ..ablation_stats import SCORES
from .controls import check_figure, figure_size

__all__ = ["VariantComparison", "ablation_variants", "compare_variants", "draw_variant_comparison"]

#: The two kinds of curve a job stores.
CURVES = ("valid", "train")


def _report(results: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(results, dict):
        if "runs" not in results:
            raise ValueError("results must be an ablation report with a 'runs' list (see load_results), "
                             f"got a dict with keys {sorted(results)[:8]}")
        return results
    path = Path(results)
    if not path.is_file():
        raise FileNotFoundError(f"no ablation results at {path}: expected the JSON of python -m benchmarks.ablations "
                                "(benchmarks/results/ablations-cpu.json in a clone of the course)")
    return load_results(path)


def ablation_variants(results: dict[str, Any] | str | Path) -> list[str]:
    """The variants with at least one run, baseline first (choices for a drop-down)."""
    names = list(dict.fromkeys(r["variant"] for r in _report(results)["runs"]))
    return sorted(names, key=lambda n: (n != "baseline", names.index(n)))


@dataclass(frozen=True)
class VariantComparison:
    """What :func:`compare_variants` read."""

    variant: str
    reference: str
    kind: str
    steps: list[float]
    curves: dict[str, dict[int, list[float]]]
    finals: dict[str, dict[int, float | None]]
    metric: str
    paired: list[int]
    differences: list[float | None]
    labels: dict[str, str]


def compare_variants(variant: str = "pre_ln", reference: str = "baseline", kind: str = "valid", metric: str = "ppl",
                     *, results: dict[str, Any] | str | Path) -> VariantComparison:
    """Curves and final figures of two variants of the ablation suite, paired by seed."""
    if kind not in CURVES:
        raise ValueError(f"kind must be one of {CURVES}, got {kind!r}")
    if metric not in SCORES:
        raise ValueError(f"metric must be one of {SCORES}, got {metric!r}")
    report = _report(results)
    known = ablation_variants(report)
    for name, role in ((variant, "variant"), (reference, "reference")):
        if name not in known:
            raise ValueError(f"{role} {name!r} has no runs in the results: expected one of {known}")
    per_seed: dict[str, dict[int, list[float]]] = {}
    finals: dict[str, dict[int, float | None]] = {}
    steps: list[float] = []
    for name in dict.fromkeys((reference, variant)):
        runs = sorted((r for r in report["runs"] if r["variant"] == name), key=lambda r: r["seed"])
        steps, values = curves(report, name, kind)
        per_seed[name] = {r["seed"]: v for r, v in zip(runs, values)}
        finals[name] = {r["seed"]: (None if r.get("diverged") else r.get(metric)) for r in runs}
    paired = sorted(set(finals[variant]) & set(finals[reference]))
    differences = [None if finals[variant][s] is None or finals[reference][s] is None
                   else finals[variant][s] - finals[reference][s] for s in paired]  # type: ignore[operator]
    summary = report.get("summary", {})
    labels = {n: summary.get(n, {}).get("label", n) for n in (reference, variant)}
    return VariantComparison(variant, reference, kind, list(steps), per_seed, finals, metric, paired, differences,
                             labels)


@figure_size(11.0, 3.8)
def draw_variant_comparison(fig: Figure | SubFigure, variant: str = "pre_ln", reference: str = "baseline",
                            kind: str = "valid", metric: str = "ppl",
                            *, results: dict[str, Any] | str | Path) -> VariantComparison:
    """Each seed's curve of both variants, and their final figures joined seed by seed: 2 axes."""
    check_figure(fig, "draw_variant_comparison")
    view = compare_variants(variant, reference, kind, metric, results=results)
    curve_ax, pair_ax = fig.subplots(1, 2, width_ratios=(1.7, 1))
    colors = {reference: "black", variant: "C3"} if variant != reference else {variant: "C3"}
    for name, color in colors.items():
        for k, (seed, values) in enumerate(view.curves[name].items()):
            length = min(len(values), len(view.steps))
            curve_ax.plot(view.steps[:length], values[:length], marker="o" if kind == "valid" else None, ms=3, lw=1.2,
                          color=color, alpha=0.9 - 0.15 * k, ls=["-", "--", ":", "-."][k % 4],
                          label=f"{name}, seed {seed}")
    if kind == "valid":
        curve_ax.set_yscale("log")
        curve_ax.set_ylabel("validation perplexity (log scale)")
    else:
        curve_ax.set_ylabel("training NLL per token")
    curve_ax.set_xlabel("step")
    curve_ax.grid(alpha=0.3, which="both")
    curve_ax.legend(fontsize=7, ncols=2)
    curve_ax.set_title(view.labels[variant][:70], fontsize=9)
    names = list(colors)
    for seed in view.paired:
        ys = [view.finals[n][seed] for n in names]
        if None not in ys:
            pair_ax.plot(range(len(names)), ys, "-", color="gray", lw=1)
        for x, (n, y) in enumerate(zip(names, ys)):
            if y is not None:
                pair_ax.plot([x], [y], "o", color=colors[n], ms=5)
    for x, n in enumerate(names):
        finite = [v for v in view.finals[n].values() if v is not None]
        if finite:
            pair_ax.plot([x - 0.15, x + 0.15], [np.mean(finite)] * 2, color=colors[n], lw=2.5)
    pair_ax.set_xticks(range(len(names)), names)
    pair_ax.set_xlim(-0.5, len(names) - 0.5)
    pair_ax.set_ylabel("final validation perplexity" if metric == "ppl" else "final BLEU")
    shown = [f"{d:+.2f}" for d in view.differences if d is not None]
    pair_ax.set_title(f"seed by seed ({', '.join(map(str, view.paired))}); bar = mean\n"
                      f"{variant} - {reference}: {', '.join(shown) or 'n/a'}", fontsize=9)
    pair_ax.grid(alpha=0.3, axis="y")
    return view
