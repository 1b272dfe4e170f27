"""benchmarks.compare_torch and stacked_projection at a tiny size: they run, write their JSON, and both models decode alike.

No timing is asserted: speeds on a shared machine say nothing about correctness.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from minitransformer import Transformer, TransformerConfig, greedy_decode, set_seed
from benchmarks import compare_torch
from benchmarks.harness import TorchTransformer

ROOT = Path(__file__).resolve().parents[1]


def test_the_benchmark_runs_at_a_tiny_size_and_writes_every_record(tmp_path):
    out = tmp_path / "compare.json"
    result = compare_torch.main(["--quick", "--sizes", "dates", "base", "--threads", "1", "--device", "cpu",
                                "--json", str(out)])
    saved = json.loads(out.read_text())
    assert saved["records"] == json.loads(json.dumps(result["records"]))
    tasks = [(r["size"], r["task"], r["batch"]) for r in saved["records"]]
    assert tasks == [(size, task, batch) for size in ("dates", "base")
                     for task, batch in (("train", 8), ("greedy 32", 1), ("greedy 32", 32))]
    for r in saved["records"]:
        assert r["ours"] > 0 and r["torch"] > 0 and abs(r["ratio"] - r["ours"] / r["torch"]) < 1e-9
        assert r["threads"] == 1 and len(saved["load_before"]) == 3
        if r["task"] != "train":
            assert r["agreement"] == 1.0  # same weights, same greedy search


def test_torch_greedy_decoding_without_a_cache_matches_ours_with_one():
    set_seed(0)
    model = Transformer(TransformerConfig.tiny(30, dropout=0.0)).eval()
    src = torch.randint(3, 30, (3, 7), generator=torch.Generator().manual_seed(0))
    src[1, 5:] = 0  # padding
    ours = greedy_decode(model, src, 10, bos_id=1, eos_id=None)
    theirs = TorchTransformer(model).eval().greedy_decode(src, 10, bos_id=1, banned_ids=[0, 1])
    assert torch.equal(ours, theirs)


def test_stacked_projection_benchmark_runs_and_reports_both_timings(tmp_path: Path) -> None:
    out = tmp_path / "stacked.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.stacked_projection", "--sizes", "8", "16",
                           "--rows", "4", "--repeats", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "three / stacked" in done.stdout
    found = json.loads(out.read_text())
    assert [r["d_model"] for r in found["results"]] == [8, 16]
    assert all(r["three_s"] > 0 and r["stacked_s"] > 0 and r["ratio"] > 0 for r in found["results"])
    bad = subprocess.run([sys.executable, "-m", "benchmarks.stacked_projection", "--rows", "0"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "must be >= 1" in bad.stderr
