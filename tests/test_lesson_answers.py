"""The numbers the lessons' prose gives are the numbers their data give (issue 44).

Each "Try it" answer is recomputed here from the playground function behind its control, at the
settings the question names, and each summary figure from the stored output or record it describes.
The stored notebooks are read, not run.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _cells(lesson: str) -> list[dict]:
    path = next(NOTEBOOKS.glob(f"{lesson}_*.ipynb"))
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _markdown(lesson: str, starts: str) -> str:
    found = ["".join(c["source"]) for c in _cells(lesson) if c["cell_type"] == "markdown"
             and "".join(c["source"]).startswith(starts)]
    assert len(found) == 1, f"lesson {lesson}: expected one markdown cell starting {starts!r}, found {len(found)}"
    return found[0]


def _answer(lesson: str) -> str:
    """The folded answer of the lesson's "Try it" question."""
    text = _markdown(lesson, "## Try it")
    assert "**Predict before you move it:**" in text and "**Your question:**" in text
    found = re.search(r"<details><summary>Answer</summary>(.*?)</details>", text, re.DOTALL)
    assert found, f"lesson {lesson}: the 'Try it' question has no folded answer"
    return found.group(1)


def _outputs(lesson: str) -> str:
    return "\n".join("".join(o.get("text", "")) for c in _cells(lesson) if c["cell_type"] == "code"
                     for o in c.get("outputs", []))


@pytest.mark.parametrize("lesson", ["01", "02", "03", "04", "05", "06", "07", "08b", "09", "10"])
def test_every_try_it_has_a_prediction_and_a_folded_answer(lesson: str):
    assert _answer(lesson).strip()


def test_lesson_01_try_it():
    from minitransformer.playground.embeddings import embedding_scale

    answer = _answer("01")
    ratios = {d: embedding_scale(d, scaled=False, init="normal").ratio for d in (128, 256)}
    assert ratios[128] >= 0.1 > ratios[256]
    assert f"$d_{{\\text{{model}}}} = 256$ the ratio is {ratios[256]:.3f} ({ratios[128]:.3f} at 128)" in answer
    pytorch = [embedding_scale(d, scaled=False, init="pytorch").ratio for d in (32, 512, 2048)]
    assert all(abs(r - 1.4) < 0.05 for r in pytorch) and "near 1.4" in answer


def test_lesson_01_summary_gives_the_table_it_prints():
    rows = dict(re.findall(r"^(normal start, sinusoids|Xavier start, sinusoids|normal start, no positions at all)"
                           r".*?\s([\d.]+);", _outputs("01"), re.MULTILINE))
    normal, xavier, none = (float(rows[k]) for k in ("normal start, sinusoids", "Xavier start, sinusoids",
                                                      "normal start, no positions at all"))
    summary = _markdown("01", "## Summary")
    assert (f"cost\n  {normal - xavier:.1f} BLEU against the normal start ({xavier:.1f} against {normal:.1f})"
            in summary and f"no positions at all ({none:.1f})" in summary)
    assert xavier > none, "the summary says the Xavier start is on a level with no positions, not below"


def test_lesson_02_try_it():
    from minitransformer.playground.positional import offset_rotation

    answer = _answer("02")
    dots = {base: offset_rotation(10, 64, 60, base).expected for base in (10000.0, 100.0)}
    assert f"dot product is {dots[10000.0]:.1f} with base 10000 and {dots[100.0]:.1f} with base 100" in answer
    slowest = {base: 2 * math.pi * base ** (62 / 64) for base in (100.0, 10000.0)}
    assert f"about {round(slowest[100.0], -1):.0f} positions" in answer
    assert f"about {round(slowest[10000.0], -3) / 1000:.0f},000 at base 10000" in answer
    near = [k for k in range(1, 51) if math.cos(k) > 0.95]  # the control's offsets: 0 to 50
    assert near[0] == 6 and "$k = 6$" in answer
    assert max(range(1, 51), key=math.cos) == 44 and "$k = 44$, seven turns" in answer


def test_lesson_03_try_it():
    from minitransformer.playground.attention import masked_attention, softmax_saturation

    answer = _answer("03")
    unscaled = {d: softmax_saturation(d, scaled=False).max_weight for d in (128, 256)}
    assert unscaled[128] <= 0.9 < unscaled[256]
    assert f"{unscaled[128]:.3f} at $d_k = 128$ and {unscaled[256]:.3f} at $d_k = 256$" in answer
    assert all(abs(softmax_saturation(d, scaled=True).max_weight - 0.3) < 0.05 for d in (4, 64, 1024))
    causal, padded = masked_attention([], causal=True), masked_attention([4, 5], causal=True)
    same = [row for row in range(6) if padded.weights[row].allclose(causal.weights[row])]
    assert same == [0, 1, 2, 3] and "rows 0 to 3 stay as they were" in answer


def test_lesson_04_try_it():
    from minitransformer.playground.heads import head_patterns

    answer = _answer("04")
    views = [head_patterns(h, 64) for h in (1, 2, 4, 8, 16)]
    assert views[-1].d_k == 4 and "$d_k = 64/16 = 4$" in answer
    assert len({v.parameters for v in views}) == 1 and len({v.flops for v in views}) == 1
    assert f"{views[0].parameters:,} parameters and {views[0].flops:,} FLOPs" in answer


def _ablations() -> tuple[dict, dict]:
    from minitransformer.ablation_report import load_results
    from minitransformer.ablation_stats import analyse

    report = load_results(ROOT / "benchmarks" / "results" / "ablations-cpu.json")
    return report, analyse(report)


def test_lesson_10_try_it():
    report, analysis = _ablations()
    answer = _answer("10")
    both = [n for n, a in analysis.items() if min(a["bleu"]["differences"]) < 0 < max(a["bleu"]["differences"])]
    assert both == ["heads_1", "heads_4", "d_ff_double", "smoothing_0", "no_clip"]
    assert ", ".join(both[:-1]) + f" and {both[-1]}: all five are inconclusive on BLEU" in answer
    assert all(analysis[n]["bleu"]["verdict"] == "inconclusive" for n in both)
    below = [n for n, a in analysis.items() if max(a["bleu"]["differences"]) < 0 and a["bleu"]["verdict"] == "inconclusive"]
    named = ["heads_16", "learned_pos", "untied", "d_ff_half"]
    assert set(named) <= set(below) and len(below) > len(named) and ", ".join(named[1:3]) in answer
    low, high = sorted(-d for d in analysis["heads_16"]["bleu"]["differences"])[::4]
    assert f"every seed {low:.1f} to {high:.1f} BLEU below" in answer
    assert 2 / 2 ** 5 == 0.0625 and "at least 0.0625" in answer


def test_lesson_10_states_what_its_statistics_are():
    report, analysis = _ablations()
    how = _markdown("10", "### How to read the numbers")
    assert "**unadjusted** 95% intervals" in how and "assumes the five differences are roughly normal" in how
    line = [a[m]["p_holm"] for a in analysis.values() for m in ("ppl", "bleu") if 0.045 < a[m]["p_holm"] < 0.05]
    assert len(line) == 4 and f"four verdicts sit at {line[0]:.4f}" in how
    assert len({round(p, 6) for p in line}) == 1
    assert len(analysis) * 2 == 40 and "all 40 comparisons" in how


def test_lesson_10_states_the_schedule_result():
    from minitransformer.ablation_report import curves

    report, analysis = _ablations()
    ppl = {n: report["summary"][n]["ppl"]["mean"] for n in ("baseline", "no_warmup", "constant_lr")}
    ratio = math.exp(analysis["no_warmup"]["ppl"]["mean"])
    first = {n: sum(v[0] for v in curves(report, n, "valid")[1]) / len(curves(report, n, "valid")[1])
             for n in ("baseline", "no_warmup")}
    text = _markdown("10", "The split answers its question:")
    assert (f"perplexity {ppl['no_warmup']:.2f} without warm-up (decay kept), {ppl['constant_lr']:.2f} with a "
            f"constant rate, {ppl['baseline']:.2f} for the baseline" in text)
    assert f"a factor of {ratio:.2f} in perplexity" in text
    assert curves(report, "baseline", "valid")[0][0] == 200
    assert f"at step 200 ({first['no_warmup']:.1f} against {first['baseline']:.1f})" in text


def test_lesson_08b_gives_the_gpu_recipe_a_cuda_machine_resolves():
    from minitransformer.training import TrainOptions

    gpu = TrainOptions(dataset="multi30k", preset="base", device="cuda").resolved()
    laptop = TrainOptions(dataset="multi30k", preset="base", device="cpu").resolved()
    text = _markdown("08b", "## 3. The GPU profile")
    assert (f"a BPE vocabulary of {gpu.vocab_size:,}, batches of {gpu.batch_tokens:,} tokens per side, warm-up "
            f"{gpu.warmup:,} steps at factor {gpu.lr_factor:.1f}, {gpu.epochs} epochs") in text
    assert laptop.epochs is None  # the laptop recipe is one in a time budget
    assert (f"batches of {laptop.batch_tokens:,} tokens per side, warm-up {laptop.warmup}, factor {laptop.lr_factor}, "
            f"a {laptop.minutes:g}-minute budget") in text
    questions = _markdown("08b", "## Questions")
    assert f"GPU recipe's {gpu.warmup:,} warm-up steps" in questions and f"its {gpu.epochs} epochs" in questions


def test_lesson_05_try_it():
    from minitransformer.playground.depth import layer_gradients

    answer = _answer("05")

    def ratio(n_layers: int, norm_first: bool) -> float:
        g = layer_gradients(n_layers, norm_first).gradient_norms
        return (g[-1] / g[0]).item()

    assert f"{ratio(12, False):.2f} times at depth 12 and {ratio(24, False):.2f} at 24" in answer
    post = {n: ratio(n, False) for n in (27, 29)}
    assert f"from {post[29]:.2f} at depth 29 to {post[27]:.2f} at 27" in answer
    assert f"Pre-LN: {ratio(12, True):.2f} and {ratio(24, True):.2f}" in answer
    pre = [ratio(n, True) for n in range(2, 33)]  # the control's depths
    assert max(pre) < 1 and pre.index(max(pre)) == 0 and f"({max(pre):.2f} at most, at depth 2)" in answer


def test_lesson_06_try_it():
    from minitransformer.playground.attention import masked_attention

    answer = _answer("06")
    sentence = "the cat sat on the mat"  # the control's sentence: 6 positions
    last_two = masked_attention([4, 5], causal=True, sentence=sentence)
    assert last_two.weights[:, 4:].abs().sum() == 0 and answer.lstrip().startswith("None:")
    first = masked_attention([0], causal=True, sentence=sentence)
    assert first.weights[0].abs().sum() == 0 and not first.weights.isnan().any()
    assert first.weights[1:].sum(dim=-1).allclose(first.weights.new_ones(5)) and "returns zeros" in answer


def test_lesson_07_try_it():
    from minitransformer.playground.training import smoothed_target

    answer = _answer("07")
    assert f"$H(q) = {smoothed_target(0.1, 37000).floor:.3f}$ nats" in answer
    assert smoothed_target(0.1, 37000).floor > smoothed_target(0.1, 1000).floor  # a larger V raises the floor
    peak = {w: 512 ** -0.5 * w ** -0.5 for w in range(100, 16001, 100)}  # the control's warm-ups
    first = min(w for w, p in peak.items() if p < 5e-4)
    assert first == 7900 and "from a warm-up of 7,900" in answer and f"({peak[7800] * 1e4:.3f} \\times 10^{{-4}}$)" \
        .replace("(", "(7,800 gives $") in answer


def test_lesson_07_says_what_one_thread_costs():
    cells = _cells("07")
    setup = next("".join(c["source"]) for c in cells if c["cell_type"] == "code"
                 and "torch.set_num_threads(1)" in "".join(c["source"]))
    assert "one thread is about the fastest" not in setup and "two threads are somewhat faster" in setup


def test_lesson_09_try_it():
    import torch

    from minitransformer.playground.sampling import next_token_distribution

    answer = _answer("09")
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, 3.0, 0.0])
    entropies = [next_token_distribution(logits, t).entropy for t in (0.1, 0.5, 1.0, 2.0)]
    assert entropies == sorted(entropies) and "the entropy falls" in answer
    for t in (0.1, 1.0, 2.0):
        greedy = next_token_distribution(logits, t, top_k=1)
        assert greedy.kept == 1 and greedy.probs.argmax() == logits.argmax()
    assert "the same text at every temperature" in answer


def test_lesson_10_notes_and_references():
    cells = _cells("10")
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "costs power, which is why" not in text and "pairing by seed wins much of it back" in text  # E-new-5
    assert "verdict in section 6" not in text  # E-new-6: section 6 holds one dot plot and no verdict
    assert "An earlier version of this course" not in text and "previous version of this lesson" not in text
    assert "grows with depth, and ours has two layers" not in text  # I-new-7
    assert "depends only on which tokens are ranked first" not in text  # I-new-12


def test_lesson_04_points_only_to_committed_figures():
    text = "\n".join("".join(c["source"]) for c in _cells("04") if c["cell_type"] == "markdown")
    assert "gives its figures" not in text
    assert not list((ROOT / "benchmarks" / "results").glob("stacked*")) and "no record of its figures is committed" in text
