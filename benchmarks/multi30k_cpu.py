"""A real translator on a laptop: Multi30k German -> English trained on this machine's CPU, measured.

Usage:
    python -m benchmarks.multi30k_cpu                      # seed 0: about half an hour on 2 idle cores
    python -m benchmarks.multi30k_cpu --seeds 0 1 2 --also-minutes 15 60 --busy-run 1
                                                           # the spread over seeds, what other budgets buy,
                                                           # and the budget on a machine with a core busy
    python -m benchmarks.multi30k_cpu --data-dir DIR --seeds 0 --minutes 1 --also-minutes 0.5 \\
        --train-size 2000 --out /tmp/m30k --runs /tmp/m30k-runs   # the same code path in a few minutes

Each seed is the README's second main job, ``python -m minitransformer train --dataset multi30k``, run
from scratch (the BPE vocabulary included: its cache is switched off) with the laptop recipe
that the package picks on a machine without a CUDA GPU, into ``runs/multi30k`` (seed 0) or
``runs/multi30k-seed<N>``; ``--minutes`` gives it a time budget (``train --minutes``), ``--epochs`` a
number of epochs, and ``--also-minutes`` adds one run of the first seed per other budget
(``runs/multi30k-m<M>``); ``--busy-run N`` adds one run of the first seed in the main budget with N
processes spinning a core each beside it (``runs/multi30k-busy<N>``): a slower machine, whose record is
kept apart from the quiet runs, never averaged with them. After training, the record adds what ``translate --beam 4`` gives
with the average of the last three epoch checkpoints (the paper's section 6.1 averages too).

Writes ``<out>/multi30k-cpu.json`` (every setting, the machine, its cores and load average, torch
and the commit, each run's training curve and speed, validation BLEU against wall-clock minutes,
greedy and beam-4 test2016 BLEU with the sacreBLEU signature, a dozen test translations with their
references, and the spread over seeds) and ``<out>/multi30k-cpu.png`` (validation BLEU against
minutes, and test BLEU against the budget). Finished runs are kept in
``<out>/multi30k-cpu.partial.jsonl``, so an interrupted command resumes with the next run; ``--fresh``
starts over.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from minitransformer.data import fetch_multi30k, load_multi30k
from minitransformer.evaluation import bleu_signature
from minitransformer.training import TrainOptions, read_log, train
from minitransformer.training.checkpoint import (atomic_torch_save, average_checkpoints, list_checkpoints,
                                                 load_model)
from minitransformer.translator import corpus_scores
from minitransformer.utils import atomic_write

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Test sentences kept in the record with their translations.
SAMPLES = 12
#: Epoch checkpoints averaged for the extra test score: as many as the recipe search averaged on validation.
AVERAGED = 3
NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds, one run each (default: 0)")
    p.add_argument("--data-dir", help="folder with the Multi30k .gz files (default: the package's cache)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the recipe's choice)")
    p.add_argument("--minutes", type=float, help="the time budget of each seed's run (default: the recipe's)")
    p.add_argument("--also-minutes", type=float, nargs="*", default=[],
                   help="other budgets, one run each with the first seed: what less or more time buys")
    p.add_argument("--busy-run", type=int, default=0, metavar="N",
                   help="one more run of the first seed with N processes spinning a core each beside it (a slower "
                        "machine), recorded apart from the quiet runs (default: 0, none)")
    p.add_argument("--epochs", type=int, help="a fixed number of epochs instead of a time budget")
    p.add_argument("--train-size", type=int, help="use only the first N training pairs (a quick check)")
    p.add_argument("--runs", default="runs", help="folder of the run folders (default: runs)")
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"),
                   help="folder for multi30k-cpu.json and .png (default: benchmarks/results)")
    p.add_argument("--fresh", action="store_true", help="forget the finished seeds of an earlier invocation")
    return p


def git_commit() -> str | None:
    """The checkout's commit, with "-dirty" when tracked files differ from it; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        # the benchmark's own result files (rewritten while it runs) do not make the code dirty
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!benchmarks/results"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("-dirty" if dirty else "")) or None


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}


def averaged_scores(run: Path, test: list[tuple[str, str]], threads: int, alpha: float) -> dict[str, Any] | None:
    """Greedy and beam-4 test BLEU of the average of the run's last ``AVERAGED`` epoch checkpoints."""
    files = list_checkpoints(run)[-AVERAGED:]
    if len(files) < 2:
        return None
    torch.set_num_threads(threads)
    averaged = run / "averaged.pt"
    atomic_torch_save(average_checkpoints(files), averaged)
    model, tokenizer, _ = load_model(averaged)
    return {"checkpoints": [f.name for f in files], **corpus_scores(model, tokenizer, test, alpha=alpha)}


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while a run trains, in a background thread."""

    def __init__(self, every: float = 15.0) -> None:
        self.every, self.samples = every, [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def one_run(seed: int, minutes: float | None, args: argparse.Namespace, busy: int = 0) -> dict[str, Any]:
    """Train one seed from scratch in ``minutes`` (None: the recipe's budget or ``--epochs``), with ``busy``
    processes spinning a core each beside it; its record."""
    name = ("multi30k" + ("" if minutes == args.minutes else f"-m{minutes:g}") + (f"-seed{seed}" if seed else "")
            + (f"-busy{busy}" if busy else ""))
    out = Path(args.runs) / name
    options = TrainOptions(dataset="multi30k", data_dir=args.data_dir, device="cpu", threads=args.threads,
                           epochs=args.epochs, minutes=minutes, train_size=args.train_size, seed=seed,
                           out=str(out), overwrite=True, show=SAMPLES).resolved()
    commit = git_commit()  # the code this run trains with (taken now: the checkout may change while it runs)
    started = time.time()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        with LoadSampler() as load:
            result = train(options)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    wall = time.time() - started  # train's own wall time: BPE, training, validation and its test decode
    if result.interrupted:
        raise KeyboardInterrupt
    records = read_log(out / "log.jsonl")
    setup = next(r for r in records if r["event"] == "setup")
    since_start = lambda r: (r["time"] - started) / 60  # noqa: E731  (minutes)
    epochs = [r for r in records if r["event"] == "epoch"]
    test = next(r for r in records if r["event"] == "test")
    test_beam = next(r for r in records if r["event"] == "test_beam")
    pairs = load_multi30k("test", args.data_dir)
    averaged = averaged_scores(out, pairs, setup["threads"], options.beam_alpha)
    return {
        "seed": seed, "minutes": options.minutes, "busy_processes": busy, "commit": commit, "run_dir": str(out),
        "options": options.to_dict(), "threads": setup["threads"],
        "config": setup["config"], "parameters": setup["parameters"], "vocab_size": setup["vocab_size"],
        "steps": result.step, "train_seconds": result.seconds, "wall_seconds": wall,
        "first_step_minutes": next((since_start(r) for r in records if r["event"] == "train"), None),
        "load_average": {"start": load.samples[0], "end": load.samples[-1], "mean": statistics.fmean(load.samples),
                         "max": max(load.samples), "samples_every_s": load.every},
        "validation": [{"epoch": r["epoch"], "step": r["step"], "minutes": since_start(r), "bleu": r.get("val_bleu"),
                        "val_loss": r.get("val_loss"), "train_loss": r.get("train_loss")} for r in epochs],
        "curve": [{"step": r["step"], "loss": r["loss"], "lr": r["lr"], "tokens_per_s": r["tokens_per_s"]}
                  for r in records if r["event"] == "train"],
        "test": {"split": "test2016", "sentences": test["n"], "greedy": test["bleu"], "beam4": test_beam["bleu"],
                 "minutes_at_end": since_start(test_beam), "averaged_last": averaged},
        "samples": [{"source": s, "translation": h, "reference": t} for s, h, t in test["examples"]],
    }


def median_speed(run: dict[str, Any]) -> float:
    """A run's median training speed in tokens per second (NaN for a record without its curve)."""
    return statistics.median(c["tokens_per_s"] for c in run.get("curve") or [{"tokens_per_s": float("nan")}])


def spread(values: list[float]) -> dict[str, Any]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
            "min": min(values), "max": max(values), "values": values, "n": len(values)}


def save_figure(runs: list[dict[str, Any]], budgets: list[dict[str, Any]], loaded: list[dict[str, Any]],
                path: Path) -> None:
    """Left: validation BLEU against wall-clock minutes, every run, its test score a star at its end. Right:
    test2016 BLEU against the budget (the seeds of the main budget as dots, other budgets with one seed as
    stars, a run beside busy cores as a cross)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, budget) = plt.subplots(1, 2, figsize=(10.5, 4.0), gridspec_kw={"width_ratios": [3, 2]})
    for run in runs + budgets + loaded:
        kind = "budget" if run in budgets else "loaded" if run in loaded else "seed"
        points = [(v["minutes"], v["bleu"]) for v in run["validation"] if v["bleu"] is not None]
        what = f"{run['minutes']:g} min, seed {run['seed']}" if run.get("minutes") else f"seed {run['seed']}"
        if kind == "loaded":
            what += f", {run['busy_processes']} core{'s' if run['busy_processes'] > 1 else ''} busy"
        (line,) = curves.plot(*zip(*points), marker=".", label=what,
                              linestyle={"seed": "-", "budget": "--", "loaded": ":"}[kind])
        curves.scatter([run["test"]["minutes_at_end"]], [run["test"]["beam4"]], marker="*", s=140,
                       color=line.get_color(), zorder=3)
        budget.scatter([run.get("minutes") or run["train_seconds"] / 60], [run["test"]["beam4"]],
                       color=line.get_color(), marker={"seed": "o", "budget": "*", "loaded": "x"}[kind], zorder=3)
    curves.set_xlabel("wall-clock minutes from the start (BPE included)")
    curves.set_ylabel("sacreBLEU")
    curves.set_title("validation (300 sentences, greedy); star: test2016, beam 4", fontsize=9)
    curves.grid(alpha=0.3)
    curves.legend(fontsize=8)
    budget.set_xlabel("training budget, minutes")
    budget.set_ylabel("test2016 sacreBLEU, beam 4")
    budget.set_title("what more time buys", fontsize=9)
    budget.grid(alpha=0.3)
    fig.suptitle(f"Multi30k de->en on {os.cpu_count()} CPU cores (each run's load and speed: in the JSON)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """The sentences about the record that docs/benchmarks.md gives (tools/write_docs.py writes them there)."""
    s, runs = result["summary"], result["runs"]
    beam, greedy, minutes = s["test_beam4"], s["test_greedy"], s["wall_minutes"]
    seeds = len(runs)

    def spread_of(x: dict[str, Any], unit: str = "") -> str:
        return "" if seeds == 1 else f" (min {x['min']:.1f}{unit}, max {x['max']:.1f}{unit})"

    budget = f", trained in a {runs[0]['minutes']:g}-minute budget" if runs[0].get("minutes") else ""
    lines = [f"test2016 sacreBLEU **{beam['mean']:.1f}** with beam 4{spread_of(beam)}, {greedy['mean']:.1f} greedy"
             + budget,
             f"**{minutes['mean']:.0f} minutes** of wall time from the start, BPE included{spread_of(minutes, ' min')}"]
    if s.get("averaged_beam4"):
        count = len(runs[0]["test"]["averaged_last"]["checkpoints"])
        lines.append(f"the average of the last {NUMBERS.get(count, count)} epoch checkpoints: "
                     f"{s['averaged_beam4']['mean']:.1f} with beam 4")
    for r in runs:
        a = r["load_average"]
        speeds = [c["tokens_per_s"] for c in r.get("curve", [])]
        speed = f", a median of {statistics.median(speeds):,.0f} tokens per second" if speeds else ""
        lines.append(f"seed {r['seed']}: {r['wall_seconds'] / 60:.0f} min at load average "
                     + (f"{a['mean']:.1f} on average (at most {a['max']:.1f})" if "mean" in a
                        else f"{a['start']:.1f} at the start and {a['end']:.1f} at the end, not sampled in between")
                     + speed)
    quiet = median_speed(runs[0])
    for r in result.get("other_budgets", []):
        # the machine's speed beside it: a run on another day can find the same machine faster or slower
        speed = median_speed(r)
        lines.append(f"the same command in {r['minutes']:g} minutes (seed {r['seed']}, {r['steps']:,} steps at a median "
                     f"of {speed:,.0f} tokens per second, {speed / quiet:.2f} times seed {runs[0]['seed']}'s): test2016 "
                     f"sacreBLEU {r['test']['beam4']:.1f} with beam 4, {r['test']['greedy']:.1f} greedy")
    for r in result.get("loaded", []):
        busy = r["busy_processes"]
        speed = median_speed(r)
        lines.append(f"beside {busy} process{'es' if busy > 1 else ''} spinning a core (seed {r['seed']}, a slower "
                     f"machine: a median of {speed:,.0f} tokens per second, {speed / quiet:.2f} times seed "
                     f"{runs[0]['seed']}'s): **{r['wall_seconds'] / 60:.1f} minutes** of wall time, test included, for a "
                     f"{r['minutes']:g}-minute budget, {r['steps']:,} steps, test2016 sacreBLEU {r['test']['beam4']:.1f} "
                     f"with beam 4")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Every timed run trains its BPE vocabulary afresh: the tokenizer cache goes to an empty folder
    # (the data is fetched and checked first, so that it is not downloaded again into that folder).
    args.data_dir = str(fetch_multi30k(data_dir=args.data_dir))
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="multi30k-cpu-cache-")
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "multi30k-cpu.partial.jsonl"
    if args.fresh and partial.exists():
        partial.unlink()
    # a finished run is known by its seed, budget (an epoch-based run's is None) and busy cores beside it
    done = {(r["seed"], r.get("minutes"), r.get("busy_processes", 0)): r
            for r in map(json.loads, partial.read_text().splitlines())} if partial.exists() else {}
    main_minutes = TrainOptions(dataset="multi30k", device="cpu", epochs=args.epochs,
                                minutes=args.minutes).resolved().minutes
    first = args.seeds[0]
    runs_wanted = [(seed, args.minutes, main_minutes, 0) for seed in args.seeds]
    budgets_wanted = [(first, m, m, 0) for m in args.also_minutes if m != main_minutes]
    loaded_wanted = [(first, args.minutes, main_minutes, args.busy_run)] if args.busy_run else []
    for seed, minutes, resolved, busy in runs_wanted + budgets_wanted + loaded_wanted:
        if (seed, resolved, busy) in done:
            print(f"seed {seed}, {resolved} minutes, {busy} busy: already measured ({partial}), skipped")
            continue
        record = one_run(seed, minutes, args, busy)
        with partial.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        done[seed, resolved, busy] = record
    runs, budgets, loaded = ([done[s, m, b] for s, _, m, b in wanted]
                             for wanted in (runs_wanted, budgets_wanted, loaded_wanted))
    settings = {k: v for k, v in runs[0]["options"].items() if k not in ("seed", "out", "overwrite")}
    result = {
        "schema": 1,
        "command": shlex.join(["python", "-m", "benchmarks.multi30k_cpu",
                               *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(), "commits_of_the_runs": sorted({str(r["commit"]) for r in runs}),
        "machine": machine(), "settings": settings, "seeds": args.seeds,
        "summary": {"test_beam4": spread([r["test"]["beam4"] for r in runs]),
                    "test_greedy": spread([r["test"]["greedy"] for r in runs]),
                    "wall_minutes": spread([r["wall_seconds"] / 60 for r in runs]),
                    "averaged_beam4": (spread([r["test"]["averaged_last"]["beam4"] for r in runs])
                                       if all(r["test"]["averaged_last"] for r in runs) else None)},
        "bleu_signature": bleu_signature(),
        "runs": runs,
        # the same command in other budgets, one seed each: what less or more time buys
        "other_budgets": budgets,
        # the same command with cores kept busy beside it: a slower machine, never averaged with the quiet runs
        "loaded": loaded,
    }
    path = atomic_write(folder / "multi30k-cpu.json", lambda f: f.write(json.dumps(result, indent=1).encode()))
    save_figure(runs, budgets, loaded, folder / "multi30k-cpu.png")
    print(f"\nwrote {path} and {folder / 'multi30k-cpu.png'}")
    for line in summary_lines(result):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
