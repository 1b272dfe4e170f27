"""The search for the laptop translator's recipe in a time budget, measured on Multi30k's validation set.

Usage:
    python -m benchmarks.recipe_search --list                                  # the trials and their flags
    python -m benchmarks.recipe_search base b2048 --minutes 30 --threads 1     # two trials, one after the other
    python -m benchmarks.recipe_search base --minutes 1 --train-size 2000 --valid 100 --results /tmp/r.jsonl
    python -m benchmarks.recipe_search v4000-inner0-ls0.2 --alphas 1.4 2.0         # more length penalties, later

Each trial is ``python -m minitransformer train --dataset multi30k --minutes M`` with the flags of
:data:`TRIALS` (from scratch, BPE included), then scored on the validation split (1,014 pairs, never the
test set: choices are made on validation), greedy and beam 4 with two length penalties, and beam 4 with
the average of the last epoch checkpoints. One JSON line per finished trial goes to ``--results``; a
trial already there is skipped, so an interrupted search resumes. Two trials on one thread each can run
side by side on 2 cores (each then sees a machine with one core busy: the issue's "slower machine").
The training run's own test score is in its log.jsonl; the search does not read it. ``--alphas`` scores
finished trials again, beam 4 with other length penalties, into their lines (``beam4_alpha<A>``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from minitransformer.data import load_multi30k
from minitransformer.evaluation import bleu, translate_sentences
from minitransformer.training import read_log
from minitransformer.training.checkpoint import (atomic_torch_save, average_checkpoints, list_checkpoints,
                                                 load_model)
from minitransformer.utils import atomic_write

REPO_ROOT = Path(__file__).resolve().parents[1]

#: name -> flags of ``train`` beyond ``--dataset multi30k --minutes M``: one idea changed at a time
#: against the laptop recipe (the small preset, 4,096-token batches, warm-up 400, factor 0.5).
TRIALS: dict[str, list[str]] = {
    "base": [],
    "b2048": ["--batch-tokens", "2048"],
    "b2048-w150": ["--batch-tokens", "2048", "--warmup", "150"],
    "w150": ["--warmup", "150"],
    "w150-f1": ["--warmup", "150", "--lr-factor", "1.0"],
    "v6000": ["--vocab-size", "6000"],
    "ff512": ["--d-ff", "512"],
    "d192": ["--d-model", "192", "--d-ff", "768"],
    "drop0.3": ["--dropout", "0.3"],
    "ls0.2": ["--label-smoothing", "0.2"],
    "l4": ["--layers", "4"],
    "drop0": ["--dropout", "0"],
    # then one idea at a time on top of the best so far (a greedy search: each line says what one idea added)
    "drop0-b2048": ["--dropout", "0", "--batch-tokens", "2048"],
    "drop0-v4000": ["--dropout", "0", "--vocab-size", "4000"],
    "drop0-ff512": ["--dropout", "0", "--d-ff", "512"],
    "drop0-w150": ["--dropout", "0", "--warmup", "150"],
    "drop0-f0.35": ["--dropout", "0", "--lr-factor", "0.35"],
    "drop0-v2000": ["--dropout", "0", "--vocab-size", "2000"],
    "drop0-v4000-ff512": ["--dropout", "0", "--vocab-size", "4000", "--d-ff", "512"],
    "drop0-v4000-ls0.2": ["--dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2"],
    # P_drop 0.1 back, only where the paper puts it (sub-layer outputs, embedding sums): a cheaper regulariser
    "v4000-inner0": ["--inner-dropout", "0", "--vocab-size", "4000"],
    "drop0-v4000-l4": ["--dropout", "0", "--vocab-size", "4000", "--layers", "4"],
    # half the batch, the warm-up twice the steps (so the same tokens): the peak rate, factor * d_model^-0.5 *
    # warmup^-0.5, falls by sqrt 2, the square-root rule for half the batch
    "drop0-v4000-b2048-w800": ["--dropout", "0", "--vocab-size", "4000", "--batch-tokens", "2048", "--warmup", "800"],
    # on the best so far, label smoothing 0.2 without dropout: a narrower feed-forward (a cheaper step, more
    # epochs), and the paper's schedule cut off by the budget (the control for the decay to zero)
    # (4.98M parameters: under train's 5M threshold for one thread, so two are asked for, as the others use)
    "drop0-v4000-ls0.2-ff512": ["--dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2", "--d-ff", "512",
                                "--threads", "2"],
    # the two best regularisers together: P_drop 0.1 at the paper's places only, and label smoothing 0.2
    "v4000-inner0-ls0.2": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2"],
    "drop0-v4000-ls0.2-invsqrt": ["--dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2",
                                  "--lr-schedule", "inverse_sqrt"],
    # on the chosen recipe (v4000-inner0-ls0.2): twice the updates of half the size (the same warm-up tokens, a
    # peak lower by sqrt 2), a higher peak rate now that the decay to zero anneals it, stronger label smoothing
    "v4000-inner0-ls0.2-b2048-w800": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2",
                                      "--batch-tokens", "2048", "--warmup", "800"],
    "v4000-inner0-ls0.2-b1024-w1600": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2",
                                       "--batch-tokens", "1024", "--warmup", "1600"],
    "v4000-inner0-ls0.2-b512-w3200": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2",
                                      "--batch-tokens", "512", "--warmup", "3200"],
    "v4000-inner0-ls0.2-f0.7": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.2",
                                "--lr-factor", "0.7"],
    "v4000-inner0-ls0.3": ["--inner-dropout", "0", "--vocab-size", "4000", "--label-smoothing", "0.3"],
}

#: The resolved options of a run kept in its line of the results.
SETTINGS = ("vocab_size", "batch_tokens", "minutes", "warmup", "lr_factor", "lr_schedule", "label_smoothing",
            "clip_norm", "valid_sentences", "seed")


def score(model: torch.nn.Module, tokenizer: Any, pairs: list[tuple[str, str]], beam: int, alpha: float) -> float:
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    batch = 250 if beam == 1 else max(1, 250 // beam)
    return bleu(translate_sentences(model, tokenizer, sources, batch_size=batch, beam_size=beam, alpha=alpha),
                references)


def valid_scores(run: Path, pairs: list[tuple[str, str]], average: int) -> dict[str, Any]:
    """Validation BLEU of the last checkpoint (greedy, beam 4 with alpha 0.6 and 1.0) and of the average of the
    last ``average`` checkpoints (beam 4, alpha 0.6)."""
    files = list_checkpoints(run)
    model, tokenizer, _ = load_model(files[-1])
    started = time.perf_counter()
    found: dict[str, Any] = {"greedy": score(model, tokenizer, pairs, 1, 0.6)}
    for alpha in (0.6, 1.0):
        found[f"beam4_alpha{alpha}"] = score(model, tokenizer, pairs, 4, alpha)
    if len(files) >= 2:
        averaged = run / "averaged.pt"
        atomic_torch_save(average_checkpoints(files[-average:]), averaged)
        model, tokenizer, _ = load_model(averaged)
        found[f"averaged{min(average, len(files))}_beam4_alpha0.6"] = score(model, tokenizer, pairs, 4, 0.6)
        averaged.unlink()
    found["scoring_seconds"] = round(time.perf_counter() - started, 1)
    return found


def run_folder(name: str, args: argparse.Namespace) -> Path:
    return Path(args.runs) / f"{name}-m{args.minutes:g}-s{args.seed}"


def score_alphas(args: argparse.Namespace) -> None:
    """Beam 4 with each of ``args.alphas`` on the validation pairs, for the named finished trials: their last
    checkpoint and the average of their last ``args.average``, as the trial's own scores; the new scores are
    written into their lines of ``args.results``."""
    results = Path(args.results)
    records = [json.loads(line) for line in results.read_text().splitlines()]
    pairs = load_multi30k("validation", args.data_dir)[: args.valid]
    if args.threads:
        torch.set_num_threads(args.threads)
    for name in args.trials:
        found = [r for r in records if (r["trial"], r["minutes"], r["seed"], r["train_size"]) ==
                 (name, args.minutes, args.seed, args.train_size)]
        if not found:
            raise SystemExit(f"{name}: no finished trial of {args.minutes:g} minutes, seed {args.seed} in {results}")
        record = found[0]
        if len(pairs) != record["valid_sentences"]:
            raise SystemExit(f"{name} was scored on {record['valid_sentences']} validation pairs, not {len(pairs)}")
        files = list_checkpoints(run_folder(name, args))
        averaged = run_folder(name, args) / "averaged.pt"
        atomic_torch_save(average_checkpoints(files[-args.average:]), averaged)
        for prefix, path in (("", files[-1]), (f"averaged{min(args.average, len(files))}_", averaged)):
            model, tokenizer, _ = load_model(path)
            for alpha in args.alphas:
                key = f"{prefix}beam4_alpha{alpha}"
                if key not in record["valid"]:
                    record["valid"][key] = score(model, tokenizer, pairs, 4, alpha)
                print(f"{name}: {prefix.replace('_', ' ') or 'last '}beam 4, alpha {alpha:g}: {record['valid'][key]:.2f}",
                      flush=True)
        averaged.unlink()
        atomic_write(results, lambda f: f.write("".join(json.dumps(r) + "\n" for r in records).encode()))


def run_trial(name: str, args: argparse.Namespace) -> dict[str, Any]:
    out = run_folder(name, args)
    command = [sys.executable, "-m", "minitransformer", "train", "--dataset", "multi30k", "--minutes",
               f"{args.minutes:g}", "--seed", str(args.seed), "--out", str(out), "--show", "0",
               "--test-beam", "1", *TRIALS[name]]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.train_size:
        command += ["--train-size", str(args.train_size)]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    started, load_before = time.time(), os.getloadavg()[0]
    records = read_log(out / "log.jsonl") if (out / "log.jsonl").exists() else []
    if any(r["event"] == "done" and not r["interrupted"] for r in records):
        print(f"{name}: {out} holds a finished run; scoring it", flush=True)  # e.g. the search was stopped while scoring
        wall = None
    else:
        # an interrupted trial goes on inside its budget; a folder with no checkpoint starts afresh
        command.append("--resume" if list_checkpoints(out) else "--overwrite")
        print("$", shlex.join(command), flush=True)
        subprocess.run(command, check=True, cwd=REPO_ROOT, env={**os.environ, "TQDM_DISABLE": "1"})
        wall = round(time.time() - started, 1)
        records = read_log(out / "log.jsonl")
    setup = next(r for r in records if r["event"] == "setup")
    epochs = [r for r in records if r["event"] == "epoch"]
    done = [r for r in records if r["event"] == "done"]
    speeds = [r["tokens_per_s"] for r in records if r["event"] == "train"]
    pairs = load_multi30k("validation", args.data_dir)[: args.valid]
    torch.set_num_threads(args.threads or torch.get_num_threads())
    return {
        "trial": name, "flags": TRIALS[name], "minutes": args.minutes, "seed": args.seed,
        "threads": args.threads, "train_size": args.train_size, "load_before": load_before,
        "load_after": os.getloadavg()[0], "wall_seconds_with_test": wall,
        # what the run trained with, resolved (the trial's flags are relative to the laptop recipe of the day)
        "settings": {k: setup["options"][k] for k in SETTINGS if k in setup["options"]},
        "config": setup.get("config"), "tokens_per_s_median": statistics.median(speeds) if speeds else None,
        "invocations": sum(r["event"] == "setup" for r in records),  # 2 or more: interrupted and resumed
        "parameters": setup.get("parameters"), "steps": epochs[-1]["step"] if epochs else None,
        "epochs": len(epochs), "train_seconds": done[-1]["seconds"] if done else None,
        # the epochs the budget held, fractional: the first check is the first epoch's end
        "epochs_run": round(epochs[-1]["step"] / epochs[0]["step"], 2) if epochs else None,
        # the in-run validation: the first --valid-sentences pairs, greedy
        "valid_curve": [{"epoch": r["epoch"], "step": r["step"], "minutes": round((r["time"] - setup["time"]) / 60, 2),
                         "val_loss": r["val_loss"], "val_bleu": r.get("val_bleu")} for r in epochs],
        "valid_sentences": len(pairs), "valid": valid_scores(out, pairs, args.average),
    }


def outcome(record: dict[str, Any]) -> dict[str, Any]:
    """What a finished trial reached: its epochs, its last validation loss and its averaged score (or None)."""
    averaged = next((x for k, x in record["valid"].items() if k.startswith("averaged") and k.endswith("alpha0.6")), None)
    return {"epochs": record["epochs_run"], "val_loss": record["valid_curve"][-1]["val_loss"],
            "averaged": averaged}


def table(records: list[dict[str, Any]]) -> list[str]:
    """One line per finished trial: its flags, speed, steps and validation BLEU."""
    lines = [f"{'trial':18} {'min':>4} {'tok/s':>6} {'steps':>6} {'epochs':>6} {'val loss':>8} {'greedy':>7} "
             f"{'beam a0.6':>9} {'beam a1.0':>9} {'avg beam':>8}  flags"]
    for r in records:
        v, o = r["valid"], outcome(r)
        averaged = float("nan") if o["averaged"] is None else o["averaged"]
        speed = r.get("tokens_per_s_median") or float("nan")
        lines.append(f"{r['trial']:18} {r['minutes']:>4g} {speed:>6,.0f} {r['steps']:>6} "
                     f"{o['epochs']:>6.1f} {o['val_loss']:>8.3f} "
                     f"{v['greedy']:>7.2f} {v['beam4_alpha0.6']:>9.2f} {v['beam4_alpha1.0']:>9.2f} {averaged:>8.2f}  "
                     f"{shlex.join(r['flags'])}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trials", nargs="*", help=f"names of trials: {', '.join(TRIALS)}")
    p.add_argument("--list", action="store_true", help="print the trials and their flags")
    p.add_argument("--table", action="store_true", help="print the finished trials of --results")
    p.add_argument("--alphas", type=float, nargs="+", help="score the named finished trials again: beam 4 with "
                   "these length penalties on validation, written into their lines of --results")
    p.add_argument("--minutes", type=float, default=30.0, help="the budget of each trial (default: 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="CPU threads of each trial (default: train's choice)")
    p.add_argument("--train-size", type=int, help="only the first N training pairs (a quick check)")
    p.add_argument("--valid", type=int, default=None, help="score only the first N validation pairs")
    p.add_argument("--average", type=int, default=3, help="checkpoints averaged for the extra score (default: 3)")
    p.add_argument("--data-dir", help="folder of Multi30k's .gz files (default: the package's)")
    p.add_argument("--runs", default="runs/recipes", help="folder of the trials' run folders")
    p.add_argument("--results", default=str(REPO_ROOT / "benchmarks" / "results" / "multi30k-recipes.jsonl"))
    args = p.parse_args(argv)
    if args.table:
        print("\n".join(table([json.loads(x) for x in Path(args.results).read_text().splitlines()])))
        return 0
    if args.list or not args.trials:
        for name, flags in TRIALS.items():
            print(f"{name:24s} {shlex.join(flags) or '(the laptop recipe)'}")
        return 0
    unknown = [t for t in args.trials if t not in TRIALS]
    if unknown:
        p.error(f"unknown trials {unknown}; known: {', '.join(TRIALS)}")
    if args.alphas:
        score_alphas(args)
        return 0
    results = Path(args.results)
    finished = set()
    if results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            finished.add((r["trial"], r["minutes"], r["seed"], r["train_size"]))
    for name in args.trials:
        if (name, args.minutes, args.seed, args.train_size) in finished:
            print(f"{name}: already in {results}, skipped")
            continue
        record = run_trial(name, args)
        with results.open("a") as f:
            f.write(json.dumps(record) + "\n")
        v = record["valid"]
        print(f"{name}: {record['epochs']} epochs, {record['steps']} steps; valid BLEU greedy {v['greedy']:.2f}, "
              + ", ".join(f"{k} {x:.2f}" for k, x in v.items() if k.startswith(("beam", "averaged"))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
