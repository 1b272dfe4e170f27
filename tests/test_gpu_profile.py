"""The GPU profile's code path on the CPU: FLOPs and MFU, the peak table, nn.Transformer as the
yardstick, the time budget, the one command at a tiny size, and the result file's reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks import gpu_profile
from benchmarks.harness import (TorchTransformer, compare_with_torch, mfu, palm_flops_per_token, peak_tflops,
                                profile_training_step, stack_parameters, synthetic_batches, training_flops)
from minitransformer import Transformer, TransformerConfig
from minitransformer.profile_results import (find_results, format_result_table, load_result, plot_result,
                                             result_path, result_rows)
from minitransformer.training import TrainOptions, read_log, train
from minitransformer.training.schedule import transformer_lr

REPO_ROOT = Path(__file__).resolve().parents[1]
MULTI30K = REPO_ROOT.parent / "shared" / "data" / "multi30k"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenizer caches go to a temporary folder, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")


def _tiny(**changes: Any) -> TransformerConfig:
    return TransformerConfig.tiny(50, **{"d_model": 8, "n_heads": 2, "d_ff": 16, "n_encoder_layers": 1,
                                         "n_decoder_layers": 1, "dropout": 0.0, **changes})


def test_flops_follow_the_palm_formula_counted_by_hand() -> None:
    model = Transformer(_tiny())
    # Encoder layer: 4 projections (8*8 + 8), FFN (8*16 + 16) + (16*8 + 8), 2 LayerNorms (8 + 8).
    encoder = 4 * (8 * 8 + 8) + (8 * 16 + 16) + (16 * 8 + 8) + 2 * 16
    # Decoder layer: 8 projections, the same FFN, 3 LayerNorms.
    decoder = 8 * (8 * 8 + 8) + (8 * 16 + 16) + (16 * 8 + 8) + 3 * 16
    assert stack_parameters(model) == (encoder, decoder) == (600, 904)
    assert palm_flops_per_token(600, 1, 8, 10) == 6 * 600 + 12 * 1 * 8 * 10 == 4560
    # 3 source tokens (mean length 10) through the encoder, 2 target tokens (mean length 5)
    # through the decoder, whose cross-attention spans the 10 source positions.
    by_hand = 3 * (6 * 600 + 12 * 8 * 10) + 2 * (6 * 904 + 12 * 8 * 5) + 2 * 12 * 8 * 10
    assert training_flops(model.config, 600, 904, n_src=3, n_tgt=2, src_len=10, tgt_len=5) == by_hand == 27408


def test_mfu_is_achieved_over_peak_flops_and_unknown_without_a_peak() -> None:
    assert mfu(494.5e12, 989.0) == pytest.approx(0.5)
    assert mfu(1e12, None) is None


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H200", 989.0), ("NVIDIA A100-SXM4-80GB", 312.0),
    ("NVIDIA L4", 121.0), ("NVIDIA GeForce RTX 4090", 165.0),
    ("NVIDIA H100 PCIe", None), ("NVIDIA L40S", None), ("Tesla T4", None), ("cpu", None),
])
def test_the_peak_table_knows_some_gpus_and_guesses_none(name: str, peak: float | None) -> None:
    assert peak_tflops(name) == peak


def test_the_torch_twin_computes_our_logits() -> None:
    model = Transformer(_tiny(d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2, n_decoder_layers=2)).eval()
    twin = TorchTransformer(model).eval()
    batch = synthetic_batches(50, 60, 10, count=1)[0]
    with torch.no_grad():
        ours, theirs = model(batch.src, batch.tgt_in), twin(batch.src, batch.tgt_in)
    real = batch.tgt_out != 0  # padded positions are free to differ
    torch.testing.assert_close(theirs[real], ours[real], rtol=1e-4, atol=1e-5)
    assert isinstance(twin.transformer, torch.nn.Transformer)


def test_synthetic_batches_have_one_shape_and_some_padding() -> None:
    batches = synthetic_batches(100, 200, 20, count=3, seed=1)
    assert [tuple(b.src.shape) for b in batches] == [(10, 20)] * 3
    assert all(tuple(b.tgt_in.shape) == (10, 20) for b in batches)
    assert all(10 * 10 <= b.n_src_tokens < 10 * 20 for b in batches)
    assert all(int((b.src >= 3).sum()) + 10 == b.n_src_tokens for b in batches)  # ids avoid pad, bos, eos


def test_the_comparison_with_nn_transformer_runs_at_a_tiny_size() -> None:
    model = Transformer(_tiny(dropout=0.1))
    before = [p.clone() for p in model.parameters()]
    found = compare_with_torch(model, synthetic_batches(50, 40, 8, count=2), torch.device("cpu"), steps=2, warmup=1)
    for name in ("ours", "torch"):
        assert found[name]["tokens_per_s"] > 0 and found[name]["peak_memory"] is None
        assert found[name]["tgt_tokens_per_s"] < found[name]["tokens_per_s"]
    assert found["ratio"] == pytest.approx(found["ours"]["tokens_per_s"] / found["torch"]["tokens_per_s"])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # a copy was trained
    table = profile_training_step(model, synthetic_batches(50, 40, 8, count=1)[0], torch.device("cpu"), steps=1)
    assert "aten::" in table


def test_a_time_budget_stops_training_after_the_step_that_passes_it(tmp_path: Path) -> None:
    result = train(TrainOptions(dataset="dates", train_size=60, vocab_size=300, d_model=16, n_heads=2, d_ff=32,
                                layers=1, batch_tokens=200, epochs=50, time_budget=1e-6, eval_sentences=4,
                                log_every=1, show=0, test_beam=1, out=str(tmp_path)))
    assert result.step == 1
    train_record = [r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "train"][0]
    assert 0 < train_record["tgt_tokens_per_s"] < train_record["tokens_per_s"]
    with pytest.raises(ValueError, match="time_budget must be a positive number of seconds"):
        TrainOptions(time_budget=0)


def test_the_gpu_profile_command_runs_on_the_cpu_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if MULTI30K.is_dir():
        data = ["--data-dir", str(MULTI30K), "--train-size", "300"]
    else:  # the dates need nothing downloaded
        data = ["--dataset", "dates", "--train-size", "200"]
    argv = ["--preset", "tiny", "--max-steps", "20", "--eval-sentences", "8", "--batch-tokens", "800",
            "--compare-length", "16", "--compare-steps", "2", "--run-dir", str(tmp_path / "run"),
            "--out", str(tmp_path / "results"), *data]
    assert gpu_profile.main(argv) == 0
    printed = capsys.readouterr().out
    (path,) = find_results(tmp_path / "results")
    assert path == result_path(tmp_path / "results", "cpu")
    assert (tmp_path / "results" / "cpu-loss.png").stat().st_size > 1000
    result = load_result(path)
    assert result["device"]["name"] == "cpu" and result["training"]["mfu"] is None
    assert result["training"]["steps"] == 20 and result["training"]["tokens_per_s"] > 0
    assert result["comparison"]["eager"]["ratio"] > 0 and result["comparison"]["compiled"] is None
    assert 0 <= result["quality"]["greedy"] <= 100 and 0 <= result["quality"]["beam4"] <= 100
    assert len(result["loss_curve"]["steps"]) == 20
    assert "--max-steps 20" in result["run"]["command"]
    assert result["smoke"]["seconds"] > 0 and result["schedule"]["expected_steps"] <= 20
    assert result["training"]["warmup"] == result["schedule"]["warmup"] == 50  # a tenth of 20 steps, at least 50
    assert result["training"]["valid_sentences"] == 8  # --eval-sentences, under the 300 of the default
    assert result["schedule"]["lr_schedule"] == "linear_decay" and result["training"]["lr_factor"] < 1
    assert result["quality"]["beam4_seconds"] > 0 and result["quality"]["greedy_seconds"] > 0
    assert not (tmp_path / "results" / "cpu.partial.json").exists()  # the whole result replaced it
    table = format_result_table(result)
    assert printed.rstrip().endswith(table.splitlines()[-1])  # the table comes last
    assert "MFU" in table and "unknown (no peak for this device)" in table
    if MULTI30K.is_dir():
        assert "tok:13a" in result["quality"]["signature"] and "detokenized" in result["quality"]["signature"]


def _result(**training: Any) -> dict[str, Any]:
    timing = {"tokens_per_s": 2e5, "tgt_tokens_per_s": 1e5, "seconds_per_step": 0.05}
    return {
        "schema": 1,
        "device": {"name": "NVIDIA H100 80GB HBM3", "type": "cuda", "peak_bf16_tflops": 989.0},
        "run": {"date": "2026-11-23T12:00:00+00:00", "command": "python benchmarks/gpu_profile.py",
                "wall_seconds": 530.0},
        "model": {"preset": "base", "layers": 6, "d_model": 512, "parameters": 48_000_000},
        "training": {"dataset": "Multi30k de->en", "steps": 4000, "train_seconds": 400.0, "bf16": True,
                     "compiled": True, "fused_adam": True, "tokens_per_s": 300_000.0, "tgt_tokens_per_s": 140_000.0,
                     "mfu": 0.3456, "peak_memory_bytes": 3 * 2**30, **training},
        "quality": {"metric": "bleu", "split": "test2016", "greedy": 36.1, "beam4": 37.25,
                    "signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"},
        "comparison": {"eager": {"ours": timing, "torch": {**timing, "tokens_per_s": 1.6e5}, "ratio": 1.25},
                       "compiled": {"ours": timing, "torch": timing, "ratio": 1.0}},
        "loss_curve": {"steps": [10, 20], "train_loss": [9.0, 7.5], "val_steps": [20], "val_loss": [7.0]},
    }


def test_the_result_reader_formats_every_headline_figure(tmp_path: Path) -> None:
    path = tmp_path / "nvidia-h100-80gb-hbm3.json"
    path.write_text(json.dumps(_result()), encoding="utf-8")
    assert result_path(tmp_path, "NVIDIA H100 80GB HBM3") == path
    assert find_results(tmp_path) == [path] and find_results(tmp_path / "absent") == []
    (tmp_path / "padding.json").write_text('{"batches": 260}')  # another benchmark's result
    (tmp_path / "broken.json").write_text('{')
    assert find_results(tmp_path) == [path]
    rows = dict(result_rows(load_result(path)))
    assert rows["MFU"] == "34.6% of 989 TFLOP/s dense bf16"
    assert rows["ours / nn.Transformer, eager"] == "1.25x" and rows["ours / nn.Transformer, compiled"] == "1.00x"
    assert rows["BLEU on test2016, beam 4"] == "37.25" and rows["peak memory"] == "3.00 GiB"
    assert rows["wall time"].startswith("8.8 min") and rows["date"].startswith("2026-11-23")
    unknown = dict(result_rows(_result(mfu=None)))
    assert unknown["MFU"] == "unknown (no peak for this device)"
    figure = plot_result(load_result(path))
    assert len(figure.axes) == 2
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_the_result_reader_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": 1, "device": {}}), encoding="utf-8")
    with pytest.raises(ValueError, match="is not a GPU profile result: it lacks run, model"):
        load_result(path)
    path.write_text(json.dumps({**_result(), "schema": 99}), encoding="utf-8")
    with pytest.raises(ValueError, match="layout version 99"):
        load_result(path)


def test_the_warm_up_is_shaped_to_the_time_budget() -> None:
    # 300 s at 0.02 s a step: 15,000 steps, warm-up 1,500 (a tenth), under the recipe's 4,000.
    assert gpu_profile.budget_warmup(300, 0.02, 4000, None)["warmup"] == 1500
    assert gpu_profile.budget_warmup(300, 0.002, 4000, None)["warmup"] == 4000  # never above the recipe's
    assert gpu_profile.budget_warmup(300, 1.0, 4000, None)["warmup"] == 50  # never below 50
    assert gpu_profile.budget_warmup(300, 0.02, 4000, 2000)["expected_steps"] == 2000
    # 60 s of them compiling (the comparison's first compiled steps): 12,000 steps
    assert gpu_profile.budget_warmup(300, 0.02, 4000, None, compile_seconds=60)["expected_steps"] == 12000
    assert gpu_profile.budget_warmup(30, 0.02, 4000, None, compile_seconds=60)["warmup"] == 50
    # The peak, factor / sqrt(d_model * warmup), stays the recipe's: a quarter of its warm-up, half its factor
    schedule = gpu_profile.budget_warmup(100, 0.01, 4000, None, recipe_factor=2.0)
    assert schedule["warmup"] == 1000 and schedule["lr_factor"] == pytest.approx(1.0)
    assert transformer_lr(1000, 512, 1000, 1.0) == pytest.approx(transformer_lr(4000, 512, 4000, 2.0))


def test_the_training_is_timed_by_the_budget_logic_on_every_device() -> None:
    # Timed as `train --minutes` (a plan, the rate reaching zero at its end), on the GPU's recipe (40 epochs) and
    # on the CPU's (its own 30-minute plan: the rehearsal of benchmarks/gpu_run.sh once failed on the two limits)
    args = gpu_profile.build_parser().parse_args(["--preset", "tiny", "--time-budget", "120"])
    for device in ("cpu", "cuda"):
        options = gpu_profile.train_options(args, torch.device(device), False, False)
        assert (options.minutes, options.time_budget, options.epochs) == (2, None, None)
        assert options.lr_schedule == "linear_decay" and options.valid_sentences == 300
        options.minutes = 17.5 / 60  # as main narrows it to what the smoke step and the comparison left
        assert options.resolved().minutes == 17.5 / 60
    # --epochs: a plain stop at the budget instead, as train() refuses minutes and epochs together
    args = gpu_profile.build_parser().parse_args(["--preset", "tiny", "--epochs", "3"])
    options = gpu_profile.train_options(args, torch.device("cuda"), False, False)
    assert (options.minutes, options.time_budget, options.epochs, options.lr_schedule) == \
        (None, 540, 3, "inverse_sqrt")


def test_a_run_cut_short_leaves_what_it_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def cut(options: TrainOptions) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(gpu_profile, "train", cut)
    argv = ["--preset", "tiny", "--dataset", "dates", "--train-size", "100", "--batch-tokens", "400",
            "--compare-length", "8", "--compare-steps", "1", "--run-dir", str(tmp_path / "run"),
            "--out", str(tmp_path / "results")]
    with pytest.raises(KeyboardInterrupt):
        gpu_profile.main(argv)
    partial = json.loads((tmp_path / "results" / "cpu.partial.json").read_text(encoding="utf-8"))
    assert partial["complete"] is False and partial["comparison"]["eager"]["ratio"] > 0
    assert partial["smoke"]["seconds"] > 0 and partial["schedule"]["warmup"] >= 1
    assert find_results(tmp_path / "results") == []  # no whole result claimed
