"""The GPU profile in one command: the paper's base model trained on Multi30k de->en, measured.

Usage:
    python -m benchmarks.gpu_profile --data-dir DIR             # one CUDA GPU: about 9 minutes in all
    python -m benchmarks.gpu_profile --preset tiny --max-steps 20 --train-size 500 --eval-sentences 10 \\
        --data-dir DIR --out /tmp/profile                       # the same code path on a CPU, under a minute

On a CUDA GPU it
0. runs a smoke step: a small model compiled, in bf16 with fused Adam, so that a broken
   compiler or driver fails in the first minute instead of after the comparison;
1. times a training step of our Transformer and of torch.nn.Transformer holding the same
   weights, at the same shapes, batch and precision, eager and compiled (the ratio of
   tokens per second, ours / theirs);
2. trains the model with the package's own training run (``minitransformer.train``): bf16
   autocast, torch.compile, fused Adam, in the time left of --time-budget (minus --reserve for
   the final evaluation), timed as ``train --minutes`` times a run: it plans the steps and
   validations that fit from its own speed and brings the learning rate to zero at the end. The
   warm-up is shaped to that time: a tenth of the steps the comparison's speed predicts, at most
   the recipe's (the paper's 4,000 are for 100,000 steps; a 5-minute run would end inside them),
   with the factor lowered so that the peak learning rate stays the recipe's;
3. scores the test split (Multi30k test2016) with sacreBLEU on detokenized output, its
   default 13a tokenizer, greedy and beam 4 (length penalty 0.6);
4. writes ``<out>/<gpu name>.json`` (every figure, the loss curve, the date and the command)
   and ``<out>/<gpu name>-loss.png``, and prints a short table last. After each phase the
   figures so far go to ``<out>/<gpu name>.partial.json``, so a run cut short still returns
   what it measured.

Throughput is the median over the run's log intervals (the first two, which hold the
compilation, left out); MFU counts model FLOPs as in the PaLM paper's appendix (see
``benchmarks.harness``) over the GPU's dense bf16 peak, "unknown" for a GPU not in
the table. On a CPU nothing is compiled or in bf16 unless asked, and MFU is unknown.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import (compare_with_torch, device_name, mfu, peak_memory, peak_tflops, reset_peak_memory,
                                stack_parameters, synthetic_batches, time_training_steps, training_flops)
from minitransformer import Transformer, TransformerConfig, get_device, set_seed
from minitransformer.evaluation import bleu_signature
from minitransformer.profile_results import SCHEMA, format_result_table, result_path
from minitransformer.training import TrainOptions, loss_curves, read_log, save_loss_plot, train
from minitransformer.utils import atomic_write

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Splits scored at the end, by dataset.
TEST_SPLITS = {"multi30k": "test2016", "dates": "test"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--time-budget", type=float, default=540.0,
                   help="seconds for the whole command, compilation and evaluation included (default: 540)")
    p.add_argument("--reserve", type=float, default=90.0,
                   help="seconds of the budget kept for the final evaluation and files (default: 90)")
    p.add_argument("--preset", choices=("tiny", "base", "big"), default="base", help="model preset (default: base)")
    p.add_argument("--max-steps", type=int, help="stop training after this many steps")
    p.add_argument("--epochs", type=int, help="epochs of training (default: the recipe's)")
    p.add_argument("--dataset", choices=tuple(TEST_SPLITS), default="multi30k", help="default: multi30k")
    p.add_argument("--data-dir", help="folder with the Multi30k .gz files (default: the package's cache)")
    p.add_argument("--train-size", type=int, help="use only the first N training pairs")
    p.add_argument("--eval-sentences", type=int, help="sentences translated for validation and test (default: all)")
    p.add_argument("--valid-sentences", type=int,
                   help="validation sentences translated after each epoch (default: 300, as in the laptop recipe, or "
                        "--eval-sentences if fewer; the test split is not affected)")
    p.add_argument("--batch-tokens", type=int, help="token budget of each side of a batch (default: the recipe's)")
    p.add_argument("--warmup", type=int, help="warm-up steps (default: a tenth of the steps the time budget "
                   "allows at the measured speed, at most the recipe's)")
    p.add_argument("--lr-factor", type=float, help="factor of the learning-rate schedule (default: the recipe's)")
    p.add_argument("--device", default="auto", help="auto, cuda, cpu (default: auto)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile for training and the comparison (default: on CUDA only)")
    p.add_argument("--compare-steps", type=int, help="timed steps per model in the comparison (default: 30 on CUDA, "
                                                     "3 elsewhere)")
    p.add_argument("--compare-length", type=int, default=32, help="padded sentence length of the comparison's "
                                                                  "batches (default: 32)")
    p.add_argument("--run-dir", default="runs/gpu_profile",
                   help="the training run's folder (default: runs/gpu_profile)")
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"),
                   help="folder for the result JSON and loss PNG (default: benchmarks/results)")
    return p


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _with_mfu(timing: dict[str, Any], flops_per_token: float, peak: float | None) -> dict[str, Any]:
    return {**timing, "mfu": mfu(timing["tokens_per_s"] * flops_per_token, peak)}


def compare(config: TransformerConfig, batch_tokens: int, length: int, steps: int, device: torch.device,
            bf16: bool, compiled: bool, peak: float | None) -> dict[str, Any]:
    """Ours vs nn.Transformer, eager and (when asked) compiled, on the same synthetic batches."""
    set_seed(0)
    model = Transformer(config)
    batches = synthetic_batches(config.src_vocab_size, batch_tokens, length, count=4, pad_id=config.pad_id)
    n_src = sum(b.n_src_tokens for b in batches)
    n_tgt = sum(b.n_tgt_tokens for b in batches)
    rows = len(batches) * len(batches[0])
    enc, dec = stack_parameters(model)
    per_token = training_flops(config, enc, dec, n_src, n_tgt, n_src / rows, n_tgt / rows) / (n_src + n_tgt)
    out: dict[str, Any] = {"rows": len(batches[0]), "length": length, "batch_tokens": batch_tokens,
                           "vocab_size": config.src_vocab_size, "bf16": bf16, "flops_per_token": per_token}
    for mode in ("eager", "compiled"):
        if mode == "compiled" and not compiled:
            out[mode] = None
            continue
        found = compare_with_torch(model, batches, device, bf16=bf16, compile=mode == "compiled", steps=steps,
                                   warmup=3)
        out[mode] = {"ours": _with_mfu(found["ours"], per_token, peak),
                     "torch": _with_mfu(found["torch"], per_token, peak), "ratio": found["ratio"]}
        print(f"comparison, {mode}: ours {found['ours']['tokens_per_s']:,.0f} tokens/s, nn.Transformer "
              f"{found['torch']['tokens_per_s']:,.0f} tokens/s: ratio {found['ratio']:.2f}", flush=True)
        if mode == "compiled":
            torch._dynamo.reset()  # the training run compiles its own model afresh
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def smoke(config: TransformerConfig, device: torch.device, bf16: bool, compiled: bool) -> dict[str, Any]:
    """One compiled bf16 step of a small model with the run's vocabulary: the tool chain works, or fails early."""
    small = dataclasses.replace(config, d_model=64, n_heads=2, d_ff=128, n_encoder_layers=1, n_decoder_layers=1)
    set_seed(0)
    model: torch.nn.Module = Transformer(small).to(device)
    if compiled:
        model = torch.compile(model)
    start = time.perf_counter()
    timing = time_training_steps(model, synthetic_batches(small.src_vocab_size, 512, 16, count=1,
                                                          pad_id=small.pad_id),
                                 device, bf16=bf16, steps=2, warmup=1, pad_id=small.pad_id)
    if compiled:
        torch._dynamo.reset()
    seconds = time.perf_counter() - start
    print(f"smoke step: {'compiled, ' if compiled else ''}{'bf16' if bf16 else 'fp32'}, {seconds:.1f} s", flush=True)
    return {"seconds": seconds, "compiled": compiled, "bf16": bf16, "seconds_per_step": timing.seconds_per_step}


def budget_warmup(seconds: float, seconds_per_step: float, recipe_warmup: int, max_steps: int | None,
                  compile_seconds: float = 0.0, recipe_factor: float = 1.0) -> dict:
    """The warm-up for a run of ``seconds`` at ``seconds_per_step``: a tenth of its steps, 50 to the recipe's.

    ``compile_seconds`` (the comparison's first compiled steps) is spent compiling, not stepping. The schedule's
    peak, factor * d_model^-0.5 * warmup^-0.5, would rise as the warm-up shortens; ``lr_factor`` shrinks with it
    by sqrt(warmup / recipe_warmup), so the peak stays the recipe's (in the laptop recipe's search,
    benchmarks/recipe_search.py, a shorter warm-up with its higher peak lost over a quarter of the BLEU).
    """
    expected = int(max(seconds - compile_seconds, 0.0) / seconds_per_step)
    if max_steps is not None:
        expected = min(expected, max_steps)
    warmup = max(1, min(recipe_warmup, max(50, expected // 10)))
    return {"expected_steps": expected, "warmup": warmup,
            "rule": "a tenth of the expected steps, at least 50, at most the recipe's",
            "recipe_warmup": recipe_warmup, "compile_seconds": compile_seconds,
            "lr_factor": recipe_factor * math.sqrt(warmup / recipe_warmup), "recipe_lr_factor": recipe_factor}


def write_partial(path: Path, record: dict[str, Any]) -> None:
    """The figures measured so far, rewritten whole after every phase."""
    atomic_write(path, lambda f: f.write(json.dumps(record, indent=1).encode("utf-8")))


def decoding_seconds(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds spent on the greedy and the beam translations of the test split, from the log's times."""
    events = [r["event"] for r in records]
    out: dict[str, float | None] = {"greedy_seconds": None, "beam4_seconds": None}
    for split in ("test", "validation"):
        if f"{split}_beam" in events:
            end = events.index(f"{split}_beam")
            greedy = events.index(split)
            out["beam4_seconds"] = records[end]["time"] - records[greedy]["time"]
            out["greedy_seconds"] = records[greedy]["time"] - records[greedy - 1]["time"]
            break
    return out


def training_throughput(records: list[dict[str, Any]]) -> tuple[float, float]:
    """Median all-token and target-token rates of the log's intervals, the first two (compilation) left out."""
    rates = [r for r in records if r.get("event") == "train" and "tgt_tokens_per_s" in r]
    if len(rates) > 4:
        rates = rates[2:]
    if not rates:
        raise ValueError("the run's log has no throughput records: train for at least --log-every steps")
    return (statistics.median(r["tokens_per_s"] for r in rates),
            statistics.median(r["tgt_tokens_per_s"] for r in rates))


def quality_signature(metric: str) -> str:
    """How the quality figure was computed, in sacreBLEU's own words for BLEU."""
    if metric != "bleu":
        return "exact match of the whole output, in percent"
    return bleu_signature()


def train_options(args: argparse.Namespace, device: torch.device, bf16: bool, compiled: bool) -> TrainOptions:
    """The training run's options, resolved for ``device``: timed as ``train --minutes`` times a run (it plans its
    steps and validations from its own speed and brings the learning rate to zero at the end), or, with
    ``--epochs``, stopped by a time budget."""
    return TrainOptions(
        dataset=args.dataset, data_dir=args.data_dir, train_size=args.train_size, preset=args.preset,
        device=str(device), precision="bf16" if bf16 else "fp32", compile=compiled, batch_tokens=args.batch_tokens,
        epochs=args.epochs, max_steps=args.max_steps, warmup=args.warmup, lr_factor=args.lr_factor,
        eval_sentences=args.eval_sentences, out=args.run_dir,
        # On a fast GPU a greedy translation of all 1,014 validation sentences, one decoder pass per output token,
        # might take as long as an epoch's 119 steps: the window would go to validating, not training
        valid_sentences=args.valid_sentences or min(300, args.eval_sentences or 300),
        overwrite=True, keep=1, show=3, test_beam=4, log_every=10 if device.type == "cuda" else 1,
        # The whole command's budget for now; main narrows it to what the smoke step and the comparison left.
        # With --epochs, a plain stop at the budget (train() refuses minutes and epochs together)
        **({"time_budget": args.time_budget} if args.epochs is not None else {"minutes": args.time_budget / 60}),
    ).resolved()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    device = get_device(None if args.device == "auto" else args.device)
    cuda = device.type == "cuda"
    compiled = cuda if args.compile is None else args.compile
    bf16 = cuda and torch.cuda.is_bf16_supported()
    name = device_name(device)
    peak = peak_tflops(name) if cuda else None
    options = train_options(args, device, bf16, compiled)
    print(f"GPU profile on {name} (peak {peak or 'unknown'} TFLOP/s dense bf16), budget {args.time_budget:.0f} s",
          flush=True)

    config = options.model_config(options.vocab_size or 8000)
    slug_path = result_path(args.out, name)
    slug_path.parent.mkdir(parents=True, exist_ok=True)
    partial_path = slug_path.with_name(slug_path.stem + ".partial.json")
    command = shlex.join(["python", "-m", "benchmarks.gpu_profile", *(argv if argv is not None else sys.argv[1:])])
    partial: dict[str, Any] = {
        "schema": SCHEMA, "complete": False,
        "device": {"name": name, "type": device.type, "peak_bf16_tflops": peak, "torch": torch.__version__,
                   "cuda": torch.version.cuda if cuda else None},
        "run": {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": command,
                "git_commit": _git_commit(), "time_budget": args.time_budget}}
    write_partial(partial_path, partial)
    partial["smoke"] = smoke(config, device, bf16, compiled)
    write_partial(partial_path, partial)

    batch_tokens = options.batch_tokens or 4096
    steps = args.compare_steps or (30 if cuda else 3)
    comparison = compare(config, batch_tokens, args.compare_length, steps, device, bf16, compiled, peak)
    partial["comparison"] = comparison
    write_partial(partial_path, partial)

    left = args.time_budget - (time.perf_counter() - started) - args.reserve
    if left < 30:
        print(f"warning: only {left:.0f} s of the budget are left for training", flush=True)
    seconds = max(left, 1.0)
    if options.minutes is not None:
        options.minutes = round(seconds / 60, 2)  # to the second or so: the run prints it
    else:
        options.time_budget = seconds
    ours = comparison["compiled" if compiled else "eager"]["ours"]
    measured = ours["seconds_per_step"]
    schedule = budget_warmup(seconds, measured, options.warmup, options.max_steps,
                             ours["first_steps_seconds"] if compiled else 0.0, options.lr_factor)
    if args.warmup is None:
        options.warmup = schedule["warmup"]
    else:
        schedule.update(warmup=args.warmup, rule="given by --warmup", lr_factor=options.lr_factor)
    if args.lr_factor is None:
        options.lr_factor = schedule["lr_factor"]
    else:
        schedule["lr_factor"] = args.lr_factor
    schedule["lr_schedule"] = options.lr_schedule
    compiling = f" after about {schedule['compile_seconds']:.0f} s of compiling" if compiled else ""
    top = "the recipe's peak" if args.lr_factor is None and args.warmup is None else "as given"
    print(f"training for at most {seconds:.0f} s: about {schedule['expected_steps']:,} steps at "
          f"{measured:.3f} s a step{compiling}, warm-up {options.warmup:,} ({schedule['rule']}), factor "
          f"{options.lr_factor:.3g} ({top}), {options.lr_schedule}", flush=True)
    partial["schedule"] = schedule
    write_partial(partial_path, partial)
    reset_peak_memory(device)
    trained = train(options)
    memory = peak_memory(device)
    if trained.interrupted:
        print(f"interrupted: no result written beyond {partial_path} (the run's checkpoint is in {trained.out})")
        return 130

    records = read_log(trained.out / "log.jsonl")
    setup = next(r for r in records if r["event"] == "setup")
    used = TransformerConfig.from_dict(setup["config"])
    enc, dec = stack_parameters(Transformer(used))
    tokens_per_s, tgt_per_s = training_throughput(records)
    length = setup["mean_tokens"]
    flops_per_s = training_flops(used, enc, dec, tokens_per_s - tgt_per_s, tgt_per_s, length, length)
    metric = "bleu" if args.dataset != "dates" else "exact_match"
    split = "test" if any(r["event"] == "test" for r in records) else "validation"
    scale = 100.0 if metric == "exact_match" else 1.0
    test_record = next(r for r in records if r["event"] == split)
    png = save_loss_plot(trained.out / "log.jsonl", slug_path.with_name(slug_path.stem + "-loss.png"),
                         title=f"{args.preset} model on {args.dataset}, {name}: loss")
    result = {
        "schema": SCHEMA,
        "device": partial["device"],
        "run": {**partial["run"], "wall_seconds": time.perf_counter() - started},
        "smoke": partial["smoke"], "schedule": schedule,
        "model": {"preset": args.preset, "d_model": used.d_model, "n_heads": used.n_heads, "d_ff": used.d_ff,
                  "layers": used.n_encoder_layers, "dropout": used.dropout, "vocab_size": used.src_vocab_size,
                  "parameters": setup["parameters"], "encoder_parameters": enc, "decoder_parameters": dec},
        "training": {"dataset": "Multi30k de->en" if args.dataset == "multi30k" else "dates en->de",
                     "steps": trained.step, "train_seconds": trained.seconds, "batch_tokens": options.batch_tokens,
                     "warmup": options.warmup, "lr_factor": options.lr_factor,
                     "valid_sentences": options.valid_sentences, "bf16": bf16, "compiled": compiled,
                     "fused_adam": cuda, "tokens_per_s": tokens_per_s, "tgt_tokens_per_s": tgt_per_s,
                     "flops_per_token": flops_per_s / tokens_per_s, "mfu": mfu(flops_per_s, peak),
                     "peak_memory_bytes": memory, "train_loss": trained.metrics.get("train_loss"),
                     "val_loss": trained.metrics.get("val_loss"), "interrupted": trained.interrupted},
        "quality": {"metric": metric, "split": TEST_SPLITS[args.dataset] if split == "test" else split,
                    "sentences": test_record["n"], "greedy": scale * trained.metrics[f"{split}_{metric}"],
                    "beam4": scale * trained.metrics[f"{split}_{metric}_beam4"],
                    **decoding_seconds(records), "signature": quality_signature(metric)},
        "comparison": comparison,
        "loss_curve": loss_curves(records),
    }
    path = atomic_write(slug_path, lambda f: f.write(json.dumps(result, indent=1).encode("utf-8")))
    partial_path.unlink(missing_ok=True)
    print(f"\nwrote {path} and {png}\n")
    print(format_result_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
