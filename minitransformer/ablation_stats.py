"""The statistics behind lesson 10's verdicts: paired differences, confidence intervals, Holm's correction.

A variant and its reference with the same seed read the same data in the same order (and start from the same
weights where the shapes allow), so they are compared seed by seed: perplexity as log(ppl / ppl_reference),
BLEU in points, a paired t-test per comparison, Holm's correction over the suite so that the chance of any
false "better" or "worse" stays at most :data:`ALPHA`.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

#: Family-wise error rate of the verdicts (Holm's correction over the suite).
ALPHA = 0.05
#: The confidence level of the intervals.
CONFIDENCE = 0.95
#: The final figures of each ablation job that the verdicts compare.
SCORES = ("ppl", "bleu")


def _by_seed(runs: list[dict[str, Any]], name: str, metric: str) -> dict[int, float | None]:
    return {r["seed"]: (None if r["diverged"] else r[metric]) for r in runs if r["variant"] == name}


def paired_difference(runs: list[dict[str, Any]], name: str, reference: str, metric: str) -> dict[str, Any]:
    """The seed-by-seed difference of ``name`` from ``reference`` on ``metric``, with its interval and p."""
    if metric not in SCORES:
        raise ValueError(f"metric must be one of {SCORES}, got {metric!r}")
    ours, theirs = _by_seed(runs, name, metric), _by_seed(runs, reference, metric)
    seeds = sorted(set(ours) & set(theirs))
    diverged = [s for s in seeds if ours[s] is None or (metric == "ppl" and not math.isfinite(ours[s]))]
    usable = [s for s in seeds if s not in diverged and theirs[s] is not None]
    if metric == "ppl":
        differences = [math.log(ours[s] / theirs[s]) for s in usable]  # type: ignore[operator]
    else:
        differences = [ours[s] - theirs[s] for s in usable]  # type: ignore[operator]
    out: dict[str, Any] = {"seeds": usable, "differences": differences, "mean": None, "ci": None, "p": None,
                           "diverged": diverged, "scale": "log ratio" if metric == "ppl" else "points"}
    n = len(differences)
    if n == 0:
        return out
    mean = sum(differences) / n
    out["mean"] = mean
    if n < 2:
        return out
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n)
    out["ci"] = (mean - half, mean + half)
    if sd > 0:
        out["p"] = float(stats.ttest_1samp(differences, 0.0).pvalue)  # = ttest_rel on the paired values
    elif mean != 0:
        out["p"] = 0.0  # every seed moved by exactly the same amount
    return out


def holm(p_values: dict[Any, float | None]) -> dict[Any, float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not counted in the family).

    The k-th smallest of m p-values is multiplied by ``m - k + 1``; the adjusted values are made
    non-decreasing in that order and capped at 1. A hypothesis is rejected at family-wise level
    alpha when its adjusted p is below alpha.
    """
    known = sorted((p, key) for key, p in p_values.items() if p is not None)
    m = len(known)
    adjusted: dict[Any, float | None] = {key: None for key in p_values}
    running = 0.0
    for k, (p, key) in enumerate(known):
        running = max(running, min(1.0, (m - k) * p))
        adjusted[key] = running
    return adjusted


def paper_change(variant_paper: dict[str, Any] | None, base: dict[str, Any], metric: str) -> float | None:
    """The paper's change on the same scale as :func:`paired_difference` (log ratio or BLEU points)."""
    if not variant_paper:
        return None
    if metric == "ppl":
        return math.log(variant_paper["ppl"] / base["ppl"])
    return variant_paper["bleu"] - base["bleu"]


#: The paper prints perplexity with 2 decimals and BLEU with 1: a change within one unit of the
#: last digit (on the log scale, 0.01 / 4.92) is "no change" in its table.
PAPER_RESOLUTION = {"ppl": math.log(4.93 / 4.92), "bleu": 0.1}


def analyse(report: dict[str, Any], alpha: float = ALPHA) -> dict[str, dict[str, Any]]:
    """Every variant's paired comparison with its reference on both metrics, Holm-corrected over the suite."""
    from .ablations import PAPER_BASE, VARIANTS

    summary = report["summary"]
    runs = report["runs"]
    results: dict[str, dict[str, Any]] = {}
    for name, entry in summary.items():
        if name == "baseline" or entry["compare_to"] not in summary:
            continue
        results[name] = {}
        for metric in SCORES:
            result = paired_difference(runs, name, entry["compare_to"], metric)
            paper = VARIANTS[name].paper if name in VARIANTS and entry["compare_to"] == "baseline" else None
            result["paper"] = paper_change(paper, PAPER_BASE, metric)
            results[name][metric] = result
    adjusted = holm({(name, metric): r["p"] for name, by_metric in results.items() for metric, r in by_metric.items()})
    for name, by_metric in results.items():
        for metric, r in by_metric.items():
            r["p_holm"] = adjusted[(name, metric)]
            higher_is_better = metric == "bleu"
            if r["diverged"]:
                r["verdict"] = "diverged"
            elif r["p_holm"] is not None and r["p_holm"] < alpha:
                r["verdict"] = "better" if (r["mean"] > 0) == higher_is_better else "worse"
            else:
                r["verdict"] = "inconclusive"
            r["agrees"] = None
            if r["paper"] is not None and r["verdict"] in ("better", "worse"):
                if abs(r["paper"]) <= PAPER_RESOLUTION[metric] + 1e-12:
                    r["agrees"] = False
                else:
                    r["agrees"] = (r["paper"] > 0) == (r["mean"] > 0)
    return results


def describe(result: dict[str, Any], metric: str) -> str:
    """A paired difference in words with its interval, e.g. "x 1.12 [1.05, 1.20]" or "+2.1 [+0.4, +3.8]"."""
    if result["mean"] is None:
        return "—"
    if metric == "ppl":
        text = f"x {math.exp(result['mean']):.2f}"
        if result["ci"] is not None:
            text += f" [{math.exp(result['ci'][0]):.2f}, {math.exp(result['ci'][1]):.2f}]"
        return text
    text = f"{result['mean']:+.1f}"
    if result["ci"] is not None:
        text += f" [{result['ci'][0]:+.1f}, {result['ci'][1]:+.1f}]"
    return text


def describe_paper(change: float | None, metric: str) -> str:
    """The paper's change on the same scale: "x 1.08" (perplexity ratio) or "-0.9" (BLEU)."""
    if change is None:
        return "—"
    return f"x {math.exp(change):.2f}" if metric == "ppl" else f"{change:+.1f}"


__all__ = ["ALPHA", "CONFIDENCE", "SCORES", "PAPER_RESOLUTION", "analyse", "describe", "describe_paper", "holm",
           "paired_difference", "paper_change"]
