"""The statistics behind lesson 10's verdicts: paired differences, intervals, Holm's correction."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from minitransformer.ablation_report import comparison_table, verdict
from minitransformer.ablation_stats import analyse, describe, holm, paired_difference
from minitransformer.ablations import PAPER_BASE, summarize


def _runs(name: str, ppl: list[float | None], bleu: list[float]) -> list[dict]:
    return [{"variant": name, "seed": s, "ppl": p, "bleu": b, "diverged": p is None}
            for s, (p, b) in enumerate(zip(ppl, bleu))]


def test_the_paired_difference_is_scipys_paired_t_test_on_log_perplexity() -> None:
    base, other = [10.0, 12.0, 11.0, 13.0, 9.5], [11.0, 13.5, 12.0, 14.6, 10.4]
    runs = _runs("baseline", base, [20, 18, 19, 17, 21]) + _runs("heads_1", other, [19, 17.5, 18, 16, 20.6])
    r = paired_difference(runs, "heads_1", "baseline", "ppl")
    logs = [math.log(a / b) for a, b in zip(other, base)]
    assert r["differences"] == pytest.approx(logs)
    expected = stats.ttest_rel([math.log(x) for x in other], [math.log(x) for x in base])
    assert r["p"] == pytest.approx(expected.pvalue, rel=1e-9)
    interval = stats.t.interval(0.95, 4, loc=sum(logs) / 5, scale=stats.sem(logs))
    assert r["ci"] == pytest.approx(interval, rel=1e-9)
    b = paired_difference(runs, "heads_1", "baseline", "bleu")
    assert b["mean"] == pytest.approx(-0.78) and b["scale"] == "points"
    assert describe(r, "ppl").startswith(f"x {math.exp(sum(logs) / 5):.2f} [")


def test_pairing_finds_a_small_steady_effect_that_the_seed_spread_hides() -> None:
    base = [10.0, 14.0, 12.0, 16.0, 11.0]
    shifted = [x * 1.03 for x in base]  # 3% worse on every seed: the seeds' spread is far larger
    runs = _runs("baseline", base, [20] * 5) + _runs("dropout_0", shifted, [20] * 5)
    assert stats.ttest_ind(shifted, base).pvalue > 0.5  # unpaired: nothing to see
    r = paired_difference(runs, "dropout_0", "baseline", "ppl")
    assert r["p"] == 0.0 and math.exp(r["mean"]) == pytest.approx(1.03)  # every seed moved by the same amount


def test_holm_matches_the_step_down_rule() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": None, "e": 0.5})
    assert adjusted["d"] is None
    # Sorted 0.01, 0.03, 0.04, 0.5 (m = 4): 0.04, 0.09, max(0.09, 0.08), 0.5.
    assert adjusted["a"] == pytest.approx(0.04) and adjusted["c"] == pytest.approx(0.09)
    assert adjusted["b"] == pytest.approx(0.09) and adjusted["e"] == pytest.approx(0.5)
    assert holm({"x": 0.6, "y": 0.7}) == {"x": 1.0, "y": 1.0}


def _report(runs: list[dict]) -> dict:
    return {"runs": runs, "summary": summarize(runs)}


def test_verdicts_need_the_corrected_p_and_say_inconclusive_otherwise() -> None:
    base_ppl, base_bleu = [10.0, 11.0, 12.0, 10.5, 11.5], [20.0, 19.0, 18.0, 19.5, 18.5]
    runs = (_runs("baseline", base_ppl, base_bleu)
            + _runs("heads_1", [x * 1.2 + 0.01 * s for s, x in enumerate(base_ppl)], [b - 2 for b in base_bleu])
            + _runs("smoothing_0", [x * f for x, f in zip(base_ppl, (0.9, 1.1, 1.0, 0.95, 1.05))],
                    [b + d for b, d in zip(base_bleu, (1, -1, 0.5, -0.5, 0))])
            + _runs("no_warmup", [None, 30, 31, 29, 30], [0, 5, 5, 5, 5]))
    analysis = analyse(_report(runs))
    assert analysis["heads_1"]["ppl"]["verdict"] == "worse" and analysis["heads_1"]["bleu"]["verdict"] == "worse"
    assert analysis["heads_1"]["ppl"]["agrees"] is True  # the paper: 5.29 against 4.92
    assert analysis["smoothing_0"]["ppl"]["verdict"] == "inconclusive" and analysis["smoothing_0"]["ppl"]["agrees"] is None
    assert analysis["no_warmup"]["ppl"]["verdict"] == "diverged" and analysis["no_warmup"]["ppl"]["diverged"] == [0]
    assert analysis["no_warmup"]["ppl"]["paper"] is None  # not a row of Table 3
    assert analysis["heads_1"]["ppl"]["paper"] == pytest.approx(math.log(5.29 / PAPER_BASE["ppl"]))
    # Holm: every p in the family at least as large as the raw one.
    for name in analysis:
        for metric in ("ppl", "bleu"):
            r = analysis[name][metric]
            if r["p"] is not None:
                assert r["p_holm"] >= r["p"]
    assert verdict(analysis, "heads_1") == "perplexity worse, BLEU worse; paper: perplexity agrees, BLEU agrees"
    table = comparison_table(_report(runs), ["baseline", "heads_1", "smoothing_0", "no_warmup", "heads_16"])
    assert "| baseline (5 seeds) |" in table and "reference" in table and "heads_16 | | not run yet" in table
    assert "perplexity inconclusive, BLEU inconclusive" in table and "perplexity diverged" in table


def test_a_measured_change_where_the_paper_saw_none_disagrees() -> None:
    base = [10.0, 11.0, 12.0]
    runs = _runs("baseline", base, [20, 19, 18]) + _runs("heads_16", [x * 1.5 + 0.1 * s for s, x in enumerate(base)],
                                                          [15, 14, 13.1])
    analysis = analyse(_report(runs))
    assert analysis["heads_16"]["bleu"]["paper"] == pytest.approx(0.0)  # 25.8 -> 25.8
    assert analysis["heads_16"]["ppl"]["verdict"] == "worse" and analysis["heads_16"]["ppl"]["agrees"] is False


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_the_ablation_page_table_is_the_one_the_committed_json_gives() -> None:
    from minitransformer.ablation_report import load_results, page_section
    from tools.write_docs import PAGE_END, PAGE_START

    report = load_results(ROOT / "benchmarks" / "results" / "ablations-cpu.json")
    page = (ROOT / "docs" / "ablations.md").read_text(encoding="utf-8")
    block = page.split(PAGE_START, 1)[1].split(PAGE_END, 1)[0].strip()
    assert block == page_section(report).strip(), (
        "docs/ablations.md's ablation table differs from the JSON: run `python -m tools.write_docs` (or "
        "`python -m benchmarks.ablations --summarize-only --page docs/ablations.md`, which first rewrites the JSON "
        "from the finished jobs)")


def test_the_committed_suite_comes_from_one_commit_and_its_baseline_translates() -> None:
    from minitransformer.ablation_report import load_results

    report = load_results(ROOT / "benchmarks" / "results" / "ablations-cpu.json")
    commits = {r["commit"] for r in report["runs"]}
    assert len(commits) == 1 and not next(iter(commits)).endswith("-dirty"), commits
    seeds = {name: sorted(r["seed"] for r in report["runs"] if r["variant"] == name) for name in report["summary"]}
    assert len({tuple(s) for s in seeds.values()}) == 1, f"every variant should have the same seeds: {seeds}"
    assert report["summary"]["baseline"]["bleu"]["mean"] >= 15
    analysis = analyse(report)
    assert analysis["no_pos"]["bleu"]["mean"] < 0 and analysis["no_pos"]["ppl"]["mean"] > 0  # the baseline wins
