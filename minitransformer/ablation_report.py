"""Reading an ablation suite's results: paired comparisons with the baseline and the paper, and figures (lesson 10).

A verdict ("better", "worse") is given only where the paired t-test stays significant after Holm's correction
(:mod:`minitransformer.ablation_stats`); otherwise "inconclusive at this budget".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

#: The figure's panels: a title and the variants drawn in it (with the one they are compared to).
PANELS: list[tuple[str, list[str]]] = [
    ("(A) heads at fixed d_model", ["baseline", "heads_1", "heads_4", "heads_16", "heads_32"]),
    ("(B) narrower queries and keys", ["baseline", "dk_quarter"]),
    ("(C) model size", ["baseline", "d_model_half", "d_model_double", "d_ff_half", "d_ff_double"]),
    ("(D) dropout, label smoothing", ["baseline", "dropout_0", "smoothing_0"]),
    ("(E) positions", ["baseline", "learned_pos", "no_pos"]),
    ("the schedule: warm-up and decay", ["baseline", "no_warmup", "constant_lr"]),
    ("departures: LN, sharing, clipping, scaling, start", ["baseline", "pre_ln", "untied", "no_clip", "no_scale",
                                                          "xavier_embed"]),
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


def curves(report: dict[str, Any], name: str, kind: str = "valid") -> tuple[list[float], list[list[float]]]:
    """Steps and one curve per seed of variant ``name``."""
    runs = sorted((r for r in report["runs"] if r["variant"] == name), key=lambda r: r["seed"])
    if not runs:
        raise ValueError(f"no runs of variant {name!r} in the results")
    key, value = ("valid_curve", "ppl") if kind == "valid" else ("curve", "train_nll")
    steps = runs[0][key]["step"]
    return steps, [[float("nan") if v is None else v for v in r[key][value]] for r in runs]


def plot_ablation_panel(report: dict[str, Any], names: list[str], ax: Axes, kind: str = "valid",
                        title: str = "") -> Axes:
    """Mean curve and its seed range (shaded, min to max) of each variant in ``names``."""
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
        ax.plot(x, mean, color=color, lw=1.8 if name == "baseline" else 1.4, label=f"{name} ({len(per_seed)} seed{'s' if len(per_seed) > 1 else ''})")
        ax.fill_between(x, np.nanmin(values, axis=0), np.nanmax(values, axis=0), color=color, alpha=0.2, lw=0)
    if kind == "valid":
        from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("validation perplexity")
    else:
        ax.set_ylabel("training NLL per token")
    ax.set_xlabel("step")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return ax


def plot_ablation_finals(report: dict[str, Any], ax: Axes, metric: str = "ppl", names: list[str] | None = None) -> Axes:
    """Every seed's final figure as a dot, the mean as a bar mark and the seed range as a line, one row per variant.

    The baseline's seed range is shaded across all rows. A diverged run has no perplexity and
    is listed with "(diverged)" in its row label.
    """
    summary = report["summary"]
    names = [n for n in (names or list(summary)) if n in summary]
    labels = []
    for row, name in enumerate(names):
        s = summary[name][metric]
        color = "black" if name == "baseline" else "C0"
        if s["mean"] is not None:
            ax.plot([s["min"], s["max"]], [row, row], color=color, lw=1)
            ax.plot(s["values"], [row] * len(s["values"]), "o", color=color, ms=3.5, alpha=0.8)
            ax.plot([s["mean"]], [row], "|", color=color, ms=12, mew=2)
        n_div = summary[name]["diverged"]
        labels.append(f"{name} ({n_div} diverged)" if n_div else name)
    base = summary.get("baseline", {}).get(metric, {})
    if base.get("min") is not None:
        ax.axvspan(base["min"], base["max"], color="black", alpha=0.12, lw=0)
    ax.set_yticks(range(len(names)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("validation perplexity (lower is better)" if metric == "ppl" else "BLEU (higher is better)")
    ax.grid(alpha=0.3, axis="x")
    return ax


def save_ablation_figure(report: dict[str, Any], png_path: str | Path) -> Path:
    """The suite's figure: one panel of validation curves per choice, then the final perplexity and BLEU."""
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


def _pm(stats: dict[str, Any], digits: int = 1) -> str:
    if stats["mean"] is None:
        return "diverged"
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def verdict(analysis: dict[str, dict[str, Any]], name: str) -> str:
    """One phrase: how variant ``name`` compares with its reference and with the paper.

    Built from :func:`minitransformer.ablation_stats.analyse`, e.g. "perplexity worse, BLEU
    inconclusive; paper: perplexity agrees" (a paper verdict only where ours is better or worse).
    """
    parts, agreement = [], []
    for metric, label in (("ppl", "perplexity"), ("bleu", "BLEU")):
        r = analysis[name][metric]
        parts.append(f"{label} {r['verdict']}")
        if r["agrees"] is not None:
            agreement.append(f"{label} {'agrees' if r['agrees'] else 'disagrees'}")
    return ", ".join(parts) + ("; paper: " + ", ".join(agreement) if agreement else "")


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return "<0.001" if value < 0.001 else f"{value:.3g}" if value < 0.1 else f"{value:.2f}"


def comparison_table(report: dict[str, Any], names: list[str],
                     analysis: dict[str, dict[str, Any]] | None = None) -> str:
    """A Markdown table of ``names`` against their reference runs and against Table 3.

    Columns: our perplexity and BLEU (mean ± sample standard deviation over n seeds), the paired
    change from the reference with its 95% confidence interval and Holm-corrected p-value
    (perplexity as a ratio, BLEU in points), the paper's change on the same scale, and the verdict.
    """
    from .ablation_stats import analyse, describe, describe_paper

    summary = report["summary"]
    analysis = analysis if analysis is not None else analyse(report)
    rows = ["| variant | vs | perplexity (mean ± SD) | BLEU (mean ± SD) | perplexity ratio [95% CI] (Holm p) | "
            "BLEU change [95% CI] (Holm p) | paper: ratio, BLEU | verdict |", "|---|---|---|---|---|---|---|---|"]
    for name in names:
        if name not in summary:
            rows.append(f"| {name} | | not run yet | | | | | |")
            continue
        s = summary[name]
        seeds = f"{len(s['seeds'])} seed{'s' if len(s['seeds']) != 1 else ''}"
        if name not in analysis:
            rows.append(f"| {name} ({seeds}) | | {_pm(s['ppl'], 2)} | {_pm(s['bleu'])} | | | | reference |")
            continue
        a = analysis[name]
        paper = f"{describe_paper(a['ppl']['paper'], 'ppl')}, {describe_paper(a['bleu']['paper'], 'bleu')}" \
            if a["ppl"]["paper"] is not None else "—"
        rows.append(f"| {name} ({seeds}) | {s['compare_to']} | {_pm(s['ppl'], 2)} | {_pm(s['bleu'])} | "
                    f"{describe(a['ppl'], 'ppl')} ({_p(a['ppl']['p_holm'])}) | "
                    f"{describe(a['bleu'], 'bleu')} ({_p(a['bleu']['p_holm'])}) | {paper} | {verdict(analysis, name)} |")
    return "\n".join(rows)


def resolved_lists(analysis: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Variants by outcome: ``resolved`` (better, worse or diverged on a metric), ``inconclusive`` (on both),
    ``agree`` / ``disagree`` (a resolved figure that goes the paper's way / the other way, or moves
    where the paper saw no change)."""
    resolved = [n for n, a in analysis.items() if {a["ppl"]["verdict"], a["bleu"]["verdict"]} - {"inconclusive"}]
    return {"resolved": resolved, "inconclusive": [n for n in analysis if n not in resolved],
            "agree": [n for n, a in analysis.items() if True in (a["ppl"]["agrees"], a["bleu"]["agrees"])],
            "disagree": [n for n, a in analysis.items() if False in (a["ppl"]["agrees"], a["bleu"]["agrees"])]}


def page_section(report: dict[str, Any]) -> str:
    """The ablation results of docs/ablations.md, written from a results file alone (the table of lesson 10 and
    its verdicts)."""
    from .ablation_stats import ALPHA, analyse

    analysis = analyse(report)
    names = list(report["summary"])
    runs = report["runs"]
    base = report["summary"]["baseline"]
    commits = sorted({str(r.get("commit")) for r in runs})
    seeds = sorted({r["seed"] for r in runs})
    lists = resolved_lists(analysis)
    n_tests = sum(analysis[n][m]["p"] is not None for n in analysis for m in ("ppl", "bleu"))
    size = report.get("size", {})
    lines = [
        f"Results: {len(runs)} jobs ({len(names)} variants x {len(seeds)} seeds{'' if report.get('complete') else ', an unfinished suite'}) "
        f"from commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}, torch {report.get('machine', {}).get('torch')}, "
        f"{sum(r['seconds'] for r in runs) / 3600:.1f} hours of job time; {size.get('steps')} steps of "
        f"{size.get('batch_tokens')} tokens per side. Baseline: perplexity {base['ppl']['mean']:.2f} ± {base['ppl']['std']:.2f}, "
        f"greedy BLEU {base['bleu']['mean']:.1f} ± {base['bleu']['std']:.1f} on {size.get('bleu_sentences')} validation "
        "pairs (mean ± sample standard deviation over seeds). Changes are paired by seed: perplexity as a ratio, BLEU "
        f"in points, each with its 95% confidence interval and its p-value after Holm's correction over all {n_tests} "
        f"comparisons; a verdict needs a corrected p below {ALPHA}.",
        "",
        comparison_table(report, names, analysis),
        "",
        f"Resolved on at least one figure: {', '.join(lists['resolved']) or 'none'}. Inconclusive at this budget on "
        f"both: {', '.join(lists['inconclusive']) or 'none'}. Where Table 3 has a row, a resolved figure goes the "
        f"paper's way for {', '.join(lists['agree']) or 'none'}, and the other way (or moves where the paper saw no "
        f"change) for {', '.join(lists['disagree']) or 'none'}.",
    ]
    return "\n".join(lines)
