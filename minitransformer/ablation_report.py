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

from .ablations import PAPER_BASE, VARIANTS

#: The figure's panels: a title and the variants drawn in it (with the one they are compared to).
PANELS: list[tuple[str, list[str]]] = [
    ("(A) heads at fixed d_model", ["baseline", "heads_1", "heads_x4"]),
    ("(B) smaller queries and keys", ["baseline", "dk_quarter"]),
    ("(C) model width", ["baseline", "smaller", "larger"]),
    ("(D) dropout, label smoothing", ["baseline", "dropout_0", "smoothing_0"]),
    ("(E) positions, and the embeddings' start", ["baseline", "learned_pos", "no_pos", "embed_normal",
                                                    "embed_normal_learned"]),
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
        A dict with ``difference`` (ours minus theirs, means), ``measured`` (bool: the seed ranges do not
        overlap), ``better`` (bool or None), ``paper_difference`` (float or None) and ``agrees`` (bool or
        None); ``agrees`` is None when the paper has no figure or our difference is within noise, and
        False for a measured difference where the paper saw none.
    """
    ours = summary[name]
    if ours["compare_to"] not in summary:  # an unfinished suite: the reference has no run yet
        return {"difference": None, "measured": False, "better": None, "paper_difference": None, "agrees": None}
    base = summary[ours["compare_to"]]
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
        # The paper saw no change (e.g. 25.8 -> 25.8): a measured difference of ours disagrees.
        agrees = abs(paper_difference) > 1e-9 and (paper_difference > 0) == (difference > 0)
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


def _pm(stats: dict[str, Any], digits: int = 1) -> str:
    if stats["mean"] is None:
        return "diverged"
    return f"{stats['mean']:.{digits}f} ± {stats['std']:.{digits}f}"


def verdict(summary: dict[str, Any], name: str) -> str:
    """One phrase: how variant ``name`` compares with its reference run and with the paper.

    Built from :func:`compare` on perplexity and BLEU, e.g. "perplexity worse, BLEU within noise;
    vs the paper: perplexity agrees, BLEU noise" ("noise": ours is within the seed spread).
    """
    parts, agreement = [], []
    for metric, label in (("ppl", "perplexity"), ("bleu", "BLEU")):
        c = compare(summary, name, metric)
        if c["difference"] is None:
            parts.append(f"{label}: diverged" if summary[name]["diverged"] else f"{label}: no data")
            continue
        parts.append(f"{label} {'within noise' if not c['measured'] else 'better' if c['better'] else 'worse'}")
        if c["paper_difference"] is not None:
            agreement.append(f"{label} {'noise' if c['agrees'] is None else 'agrees' if c['agrees'] else 'disagrees'}")
    text = ", ".join(parts)
    if agreement:
        text += "; vs the paper: " + ", ".join(agreement)
    return text


def comparison_table(summary: dict[str, Any], names: list[str]) -> str:
    """A Markdown table of ``names``: our mean ± standard deviation over seeds, the difference from the
    reference run, the paper's Table 3 figures and difference, and the verdict (:func:`verdict`).
    """
    header = ("| variant | vs | our perplexity | Δ | our BLEU | Δ | paper perplexity (Δ) | paper BLEU (Δ) | "
              "verdict |\n|---|---|---|---|---|---|---|---|---|")
    rows = [header]
    for name in names:
        if name not in summary:
            rows.append(f"| {name} | | not run yet | | | | | | |")
            continue
        s = summary[name]
        ppl, bleu = compare(summary, name, "ppl"), compare(summary, name, "bleu")
        ref = s["compare_to"] if name != "baseline" else ""
        d_ppl = f"{ppl['difference']:+.1f}" if ppl["difference"] is not None and ref else ""
        d_bleu = f"{bleu['difference']:+.1f}" if bleu["difference"] is not None and ref else ""
        paper = s.get("paper")
        if paper and (name == "baseline" or s["compare_to"] == "baseline"):
            p_ppl = f"{paper['ppl']:.2f}" + (f" ({paper['ppl'] - PAPER_BASE['ppl']:+.2f})" if ref else "")
            p_bleu = f"{paper['bleu']:.1f}" + (f" ({paper['bleu'] - PAPER_BASE['bleu']:+.1f})" if ref else "")
        else:
            p_ppl = p_bleu = "—"
        rows.append(f"| {name} ({len(s['seeds'])} seed{'s' if len(s['seeds']) > 1 else ''}) | {ref} | {_pm(s['ppl'])} | {d_ppl} | {_pm(s['bleu'])} | "
                    f"{d_bleu} | {p_ppl} | {p_bleu} | {verdict(summary, name) if ref else 'reference'} |")
    return "\n".join(rows)


def embedding_start_report(summary: dict[str, Any]) -> str:
    """Markdown for lesson 10's test of its row E explanation, written from the results alone.

    The explanation: learned (or no) positions beat the sinusoid here because Xavier-initialised token
    vectors start small next to it. Prediction: ``embed_normal`` (token tables from N(0, 1/d_model),
    sinusoids kept) closes most of the perplexity gap between the baseline and ``learned_pos``.
    Then row E's own question with that start: ``embed_normal_learned`` against ``embed_normal``.
    Each verdict follows from :func:`compare` (seed ranges), never from a fixed sentence.
    """
    names = ("baseline", "learned_pos", "embed_normal")
    if any(name not in summary for name in names):
        return "`embed_normal` is not in these results yet: run `python benchmarks/ablations.py` to add it."
    ppl = {name: summary[name]["ppl"]["mean"] for name in names}
    if None in ppl.values():
        return "A run of the embedding test diverged: see the table above."
    closed = (ppl["baseline"] - ppl["embed_normal"]) / (ppl["baseline"] - ppl["learned_pos"])  # share of the gap
    better = compare(summary, "embed_normal", "ppl")["better"]
    if closed >= 0.5 and better:
        found = ("closes most of the gap: most of row E's difference here comes from the small start of the "
                 "Xavier table, not from the sinusoid itself")
    elif better:
        found = "closes part of the gap: the start of the embeddings explains some of row E here, not all of it"
    else:
        found = "does not close the gap: the explanation is wrong or incomplete"
    parts = [comparison_table(summary, list(names)),
             f"Mean perplexity: baseline {ppl['baseline']:.1f}, learned positions {ppl['learned_pos']:.1f}, "
             f"sinusoids with normal-initialised tokens {ppl['embed_normal']:.1f}. The new start {found} "
             f"({100 * closed:.0f}% of the perplexity gap)."]
    if "embed_normal_learned" in summary:
        parts.append(comparison_table(summary, ["embed_normal", "embed_normal_learned"]))
        row_e = {metric: compare(summary, "embed_normal_learned", metric) for metric in ("ppl", "bleu")}
        said = {True: "better", False: "worse", None: "within noise"}
        how = ", ".join(f"{label} {said[row_e[metric]['better']]}" for metric, label in (("ppl", "perplexity"),
                                                                                          ("bleu", "BLEU")))
        row = VARIANTS["learned_pos"].paper or {}  # Table 3 row E against the base model
        paper = (f"the paper found them nearly identical ({row['ppl']:.2f} against {PAPER_BASE['ppl']:.2f} perplexity, "
                 f"{row['bleu']:.1f} against {PAPER_BASE['bleu']:.1f} BLEU)")
        if row_e["ppl"]["measured"] or row_e["bleu"]["measured"]:
            tail = (f"{paper[0].upper() + paper[1:]}; at this scale a difference remains. The learned table starts "
                    "small (Xavier), while the sinusoid is as large as the token vectors from the first step; "
                    "whether 100,000 steps (the paper's budget) would close the rest, 900 steps cannot tell.")
        else:
            tail = f"That is row E's result: {paper}."
        parts.append(f"With the token tables of both drawn from N(0, 1/d_model), learned positions against "
                     f"sinusoids: {how}. {tail}")
    return "\n\n".join(parts)
