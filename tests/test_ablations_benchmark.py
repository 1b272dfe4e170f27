"""``python -m benchmarks.ablations --quick`` at a tiny size: the JSON, the figure, and resuming after an interruption."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from benchmarks import ablations as bench
from minitransformer.ablation_report import load_results
from minitransformer.ablations import SIZES, VARIANTS, find_multi30k, load_ablation_data, run_ablation, summarize

MULTI30K = find_multi30k()  # $MINITRANSFORMER_MULTI30K_DIR (conftest.py names ../shared/data/multi30k)
needs_multi30k = pytest.mark.skipif(MULTI30K is None, reason="no local Multi30k folder (tests never download it)")


@needs_multi30k
def test_quick_suite_writes_results_and_resumes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "quick.json"
    argv = ["--quick", "--size", "tiny", "--out", str(out), "--data-dir", str(MULTI30K), "--jobs", "2"]
    report = bench.main(argv)
    names = ["baseline", "no_pos", "no_warmup", "smoothing_0"]
    assert report["variants"] == names and report["seeds"] == [0, 1] and report["complete"]
    stored = json.loads(out.read_text())
    assert stored["command"].startswith("python -m benchmarks.ablations --quick")
    assert stored["machine"]["torch"] == torch.__version__ and len(stored["load_average"]["start"]) == 3
    assert out.with_suffix(".png").stat().st_size > 10_000
    for name in names:
        s = stored["summary"][name]
        assert s["seeds"] == [0, 1]
        ppl = s["ppl"]["values"]
        assert len(ppl) == 2 and all(math.isfinite(v) and v > 1 for v in ppl)
        assert ppl[0] != ppl[1]  # seeds differ
        assert s["ppl"]["min"] <= s["ppl"]["mean"] <= s["ppl"]["max"]
    run = stored["runs"][0]
    size = SIZES["tiny"]
    assert run["curve"]["step"][-1] == size.steps == run["valid_curve"]["step"][-1]
    assert len(run["curve"]["train_nll"]) == size.steps // size.log_every
    lrs = {r["variant"]: r["curve"]["lr"] for r in stored["runs"] if r["seed"] == 0}
    # No warm-up: the peak at once, then the same decay as the baseline's; the baseline ramps up first.
    assert lrs["no_warmup"][0] == max(lrs["no_warmup"]) and lrs["no_warmup"][1:] == pytest.approx(lrs["baseline"][1:])
    assert lrs["baseline"][0] < lrs["baseline"][1]
    comparisons = stored["statistics"]["comparisons"]
    assert set(comparisons) == set(names) - {"baseline"} and stored["statistics"]["alpha"] == 0.05
    assert comparisons["no_pos"]["ppl"]["paper"] is None and comparisons["smoothing_0"]["bleu"]["paper"] == pytest.approx(-0.5)
    assert all(comparisons[n][m]["verdict"] in ("better", "worse", "inconclusive", "diverged")
               for n in comparisons for m in ("ppl", "bleu"))

    # Interrupted after three jobs: the re-run does only the missing ones and gets the same figures.
    partial = out.with_suffix(".partial.jsonl")
    lines = partial.read_text().splitlines()
    assert len(lines) == 8
    partial.write_text("\n".join(lines[:3]) + '\n{"key": "cut sh')  # and a line cut short by the crash
    capsys.readouterr()
    argv = argv[:-1] + ["1", "--no-figure"]  # one job at a time, in this process
    again = bench.main(argv)
    assert "5 jobs to run (3 found in" in capsys.readouterr().out
    assert again["summary"] == stored["summary"]

    # A complete partial file: nothing to run.
    third = bench.main(argv)
    assert "0 jobs to run (8 found in" in capsys.readouterr().out
    assert third["summary"] == stored["summary"]
    assert load_results(partial)["summary"]["baseline"]["ppl"]["values"] == stored["summary"]["baseline"]["ppl"]["values"]


@needs_multi30k
def test_one_job_is_reproducible_and_a_partial_rerun_follows_the_stored_curve() -> None:
    size = SIZES["tiny"]
    data = load_ablation_data(size, MULTI30K)
    first = run_ablation("learned_pos", 3, size, data)
    second = run_ablation("learned_pos", 3, size, data)
    assert first["ppl"] == pytest.approx(second["ppl"], rel=1e-6)
    assert first["curve"]["train_nll"] == pytest.approx(second["curve"]["train_nll"], rel=1e-6)
    head = run_ablation("learned_pos", 3, size, data, max_steps=6)
    assert head["curve"]["train_nll"] == pytest.approx(first["curve"]["train_nll"][:2], rel=1e-6)
    assert summarize([first, second])["learned_pos"]["ppl"]["std"] == pytest.approx(0.0, abs=1e-6)


def test_device_cuda_picks_the_base_size_one_job_at_a_time(tmp_path: Path, monkeypatch) -> None:
    # No GPU here: pretend one, and run no job (--summarize-only), to check what the GPU suite would run.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "a pretend GPU")
    report = bench.main(["--device", "cuda", "--summarize-only", "--no-figure", "--out", str(tmp_path / "g.json")])
    assert report["size_name"] == "base" and report["size"]["d_model"] == 512 and report["size"]["layers"] == 6
    assert report["jobs_at_a_time"] == 1 and report["machine"]["gpu"] == "a pretend GPU"
    assert report["seeds"] == [0, 1, 2] and len(report["variants"]) == len(VARIANTS) and not report["complete"]


def test_bad_arguments_are_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--device", "tpu"])
    assert "--device must be cpu or cuda, got 'tpu'" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench.main(["--device", "cuda"])
        assert "torch.cuda.is_available() is False" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--variants", "bigger"])
