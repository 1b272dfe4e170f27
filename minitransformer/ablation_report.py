"""Reading an ablation suite's results: comparisons with the baseline and the paper, and figures (lesson 10).

The results are the JSON written by ``benchmarks/ablations.py`` (see
:mod:`minitransformer.ablations`). A difference between a variant and the run it is
compared with counts as *measured* only when the ranges of the two over seeds do not
overlap; otherwise it is *within noise*. The paper's direction is the sign of its
Table 3 difference from its base model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from .ablations import PAPER_BASE

#: The figure's panels: a title and the variants drawn in it (with the one they are compared to).
PANELS: list[tuple[str, list[str]]] = [
    ("(A) heads at fixed d_model", ["baseline", "heads_1", "heads_x4"]),
    ("(B) smaller queries and keys", ["baseline", "dk_quarter"]),
    ("(C) model width", ["baseline", "smaller", "larger"]),
    ("(D) dropout, label smoothing", ["baseline", "dropout_0", "smoothing_0"]),
    ("(E) positions", ["baseline", "learned_pos", "no_pos"]),
    ("warm-up: post-LN and pre-LN", ["baseline", "no_warmup", "pre_ln", "pre_ln_no_warmup"]),
    ("scaling, sharing, clipping", ["baseline", "no_scale", "untied", "no_clip"]),
]


def load_results(path: str | Path) -> dict[str, Any]:
    """The JSON of ``benchmarks/ablations.py``, or the records of its partial ``.partial.jsonl`` file.

    A partial file (written while the suite runs) is summarised on the fly, so a lesson can be
    developed against an unfinished suite.
    """
    path = Path(path)
    if path.suffix == ".jsonl":
        from .ablations import summarize

        runs = []
        for line in path.read_text().splitlines():
            try:
                runs.append(json.loads(line)["result"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # a line cut short by a crash
        return {"runs": runs, "summary": summarize(runs), "complete": False}
    report = json.loads(path.read_text())
    if "summary" not in report or "runs" not in report:
        raise ValueError(f"{path} is not an ablation results file: expected keys 'summary' and 'runs'")
    return report


def compare(summary: dict[str, Any], name: str, metric: str = "ppl") -> dict[str, Any]:
    """How variant ``name`` differs from the run it is compared with, and from the paper's direction.

    Args:
        summary: the ``summary`` of a results file.
        name: a variant in it.
        metric: "ppl" (lower is better) or "bleu" (higher is better).

    Returns:
        ``{"difference": ours - theirs (means), "measured": bool (seed ranges do not overlap),
        "better": bool | None, "paper_difference": float | None, "agrees": bool | None}``;
        ``agrees`` is None when the paper has no figure or our difference is within noise.
    """
    ours, base = summary[name], summary[summary[name]["compare_to"]]
    a, b = ours[metric], base[metric]
    if a["mean"] is None or b["mean"] is None:
        return {"difference": None, "measured": ours["diverged"] > 0, "better": False if ours["diverged"] else None,
                "paper_difference": None, "agrees": None}
    difference = a["mean"] - b["mean"]
    measured = a["min"] > b["max"] or a["max"] < b["min"]
    better = (difference < 0) if metric == "ppl" else (difference > 0)
    paper = ours.get("paper")
    paper_difference = None
    if paper and ours["compare_to"] == "baseline" and name != "baseline":
        paper_difference = paper[metric] - PAPER_BASE[metric]
    agrees = None
    if paper_difference is not None and measured:
        agrees = paper_difference == 0 or (paper_difference > 0) == (difference > 0)
    return {"difference": difference, "measured": measured, "better": better if measured else None,
            "paper_difference": paper_difference, "agrees": agrees}


def curves(report: dict[str, Any], name: str, kind: str = "valid") -> tuple[list[float], list[list[float]]]:
    """Steps and one curve per seed of variant ``name``.

    Args:
        kind: "valid" (validation perplexity) or "train" (training NLL per token).
    """
    runs = sorted((r for r in report["runs"] if r["variant"] == name), key=lambda r: r["seed"])
    if not runs:
        raise ValueError(f"no runs of variant {name!r} in the results")
    key, value = ("valid_curve", "ppl") if kind == "valid" else ("curve", "train_nll")
    steps = runs[0][key]["step"]
    return steps, [[float("nan") if v is None else v for v in r[key][value]] for r in runs]


def plot_ablation_panel(report: dict[str, Any], names: list[str], ax: Axes, kind: str = "valid",
                        title: str = "") -> Axes:
    """Mean curve and its seed range (shaded, min to max) of each variant in ``names``.

    Args:
        report: a results dict (:func:`load_results`).
        names: variants to draw; those without runs are skipped.
        ax: where to draw.
        kind: "valid" (validation perplexity, log scale) or "train" (training NLL).
        title: the panel's title.
    """
    import numpy as np

    for k, name in enumerate(names):
        if not any(r["variant"] == name for r in report["runs"]):
            continue
        steps, per_seed = curves(report, name, kind)
        length = min(len(c) for c in per_seed)
        values = np.array([c[:length] for c in per_seed], dtype=float)  # (seeds, points)
        x = np.array(steps[:length])
        color = "black" if name == "baseline" else f"C{k}"
        with np.errstate(all="ignore"):
            mean = np.nanmean(values, axis=0) if np.isfinite(values).any() else values[0]
        ax.plot(x, mean, color=color, lw=1.8 if name == "baseline" else 1.4, label=f"{name} ({len(per_seed)} seeds)")
        ax.fill_between(x, np.nanmin(values, axis=0), np.nanmax(values, axis=0), color=color, alpha=0.2, lw=0)
    if kind == "valid":
        ax.set_yscale("log")
        ax.set_ylabel("validation perplexity")
    else:
        ax.set_ylabel("training NLL per token")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return ax


def plot_ablation_finals(report: dict[str, Any], ax: Axes, metric: str = "ppl", names: list[str] | None = None) -> Axes:
    """Every seed's final figure as a dot and the mean as a bar, one row per variant.

    A diverged run has no perplexity and is marked with an x at the right edge.
    """
    summary = report["summary"]
    names = [n for n in (names or list(summary)) if n in summary]
    for row, name in enumerate(names):
        s = summary[name][metric]
        color = "black" if name == "baseline" else "C0"
        if s["mean"] is not None:
            ax.barh(row, s["mean"], color=color, alpha=0.25)
            ax.plot(s["values"], [row] * len(s["values"]), "o", color=color, ms=3)
        if metric == "ppl" and summary[name]["diverged"]:
            ax.plot([ax.get_xlim()[1]], [row], "x", color="C3")
    base = summary.get("baseline", {}).get(metric, {})
    if base.get("min") is not None:
        ax.axvspan(base["min"], base["max"], color="black", alpha=0.1, lw=0)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("validation perplexity (lower is better)" if metric == "ppl" else "BLEU (higher is better)")
    ax.grid(alpha=0.3, axis="x")
    return ax


def save_ablation_figure(report: dict[str, Any], png_path: str | Path) -> Path:
    """The suite's figure: one panel of validation curves per choice, then the final perplexity and BLEU.

    Returns:
        ``png_path``.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(15, 13), layout="constrained")
    axes = figure.subplots(3, 3).ravel()
    for ax, (title, names) in zip(axes, PANELS):
        plot_ablation_panel(report, names, ax, title=title)
    plot_ablation_finals(report, axes[7], "ppl")
    plot_ablation_finals(report, axes[8], "bleu")
    size = report.get("size", {})
    figure.suptitle(f"Ablations on Multi30k de->en: d_model {size.get('d_model')}, {size.get('steps')} steps; "
                    "shaded: range over seeds", fontsize=12)
    figure.savefig(png_path, dpi=80)
    return Path(png_path)
