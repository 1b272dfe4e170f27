"""The ablation suite of lesson 10: the baseline and one variant per choice, each over several seeds.

Usage:
    python -m benchmarks.ablations                      # the full CPU suite -> results/ablations-cpu.json
    python -m benchmarks.ablations --quick              # a reduced set at a small size, a few minutes
    python -m benchmarks.ablations --device cuda        # the same variants at the paper's base size
    python -m benchmarks.ablations --summarize-only --page docs/ablations.md   # the JSON and that page's table

Every job (variant, seed) trains a fresh model with :func:`minitransformer.ablations.run_ablation`
for a fixed number of steps on Multi30k de->en and scores validation perplexity and sacreBLEU
(greedy, on a fixed subset of the validation split). Jobs run in a pool of single-threaded
processes (``--jobs``, default 2 on a CPU). Each finished job is appended at once to a partial
results file (JSON lines, next to the output); a re-run with the same settings skips the jobs
found there, so an interrupted suite loses only the jobs in flight. When every job is done the
script writes the JSON (every curve, every final figure, mean and spread over seeds, the command,
commit, machine, torch version, load averages, wall time) and a PNG figure with the seed spread.

Why this task and size (pilot runs, in the JSON's ``pilot`` note and in lesson 10): the dates of
lesson 07 reach 100% exact match within a few epochs, so every variant looks the same. On
Multi30k a 1.4M-parameter model (d_model 128, 2+2 layers, 8 heads as in the paper) is far from
converged after a few thousand steps of 1,200 tokens; the budget is the shortest at which the
baseline translates (BLEU >= 15) and beats the model without positions.

The verdicts (lesson 10, ``minitransformer.ablation_stats``) compare each variant with its
reference seed by seed: seed s gives every variant the same batch order (and the same start
where the shapes agree), so the paired difference cancels most of the seed's luck.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from minitransformer.ablations import (QUICK_VARIANTS, SIZES, VARIANTS, find_multi30k, init_worker, run_worker_job,
                                       summarize)
from minitransformer.utils import atomic_write

HERE = Path(__file__).resolve().parents[1]

DEFAULT_DATA = find_multi30k()
#: Why this task and size: the pilot runs, stored in the JSON (the committed suite was started with this text).
PILOT = ('Pilot runs (same code, Multi30k de->en, d_model 128, 2+2 layers, 8 heads, d_ff 512, BPE 4000, batches of '
         '1,200 tokens, seed 0, two at a time on the 2-core machine; validation perplexity every 300 steps, greedy BLEU '
         'on the first 200 validation pairs). lr factor 0.5, warm-up 100, 2,400 steps: baseline 47.5, 27.6, 19.2, '
         '15.0, 12.6, 11.0, 10.3, 9.51, BLEU 28.3; without positions 35.9, 19.9, 15.1, 12.7, 11.4, 10.5, 10.1, 9.49, '
         'BLEU 25.7 (no positions ahead in perplexity until step 2,400). lr factor 1.0, warm-up 150, 1,500 steps: '
         'baseline 54.6 .. 23.8, BLEU 9.6; without positions 43.6 .. 16.5, BLEU 16.6 (a larger rate hurts post-LN). '
         'lr factor 0.5, warm-up 400 (peak rate 0.0022), 1,500 steps: baseline 64.3, 22.7, 14.0, 11.1, 9.64, BLEU '
         '29.5; without positions 58.3, 22.7, 15.4, 12.6, 11.1, BLEU 26.1: the baseline ahead from step 900 on. '
         'Chosen: warm-up 400, factor 0.5, 1,000 steps (about 2.2 epochs), the shortest budget at which the baseline '
         'translates and beats the model without positions, so that 21 variants x 5 seeds fit about four hours '
         'on 2 cores.')


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "minitransformer",
                                "benchmarks/ablations.py"], cwd=HERE, capture_output=True, text=True, check=True)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def read_partial(path: Path, key: dict[str, Any]) -> list[dict[str, Any]]:
    """The finished jobs stored in ``path`` for these settings (other settings' lines are ignored).

    A line cut short by a crash (the last one) is ignored too.
    """
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("key") == key:
            records.append(record["result"])
    return records


def append_partial(path: Path, key: dict[str, Any], result: dict[str, Any]) -> None:
    """Append one finished job as a JSON line and flush it to disk.

    A last line cut short by a crash is ended first, so that it stays one (ignored) line.
    """
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            cut = handle.read(1) != b"\n"
    else:
        cut = False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(("\n" if cut else "") + json.dumps({"key": key, "result": result}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"the reduced set {', '.join(QUICK_VARIANTS)} at the 'quick' size, 2 seeds")
    parser.add_argument("--size", choices=sorted(SIZES),
                        help="baseline and budget (default: cpu; quick with --quick; base with --device cuda)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), help="default: all (or the quick set)")
    parser.add_argument("--seeds", type=int, help="seeds 0 .. N-1 of every variant (default: 5 on a CPU, 3 on a GPU, "
                                                  "2 with --quick)")
    parser.add_argument("--jobs", type=int, help="processes run at the same time (default: 2 on a CPU, 1 on a GPU)")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads per process (default: 1)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA) if DEFAULT_DATA else None,
                        help="folder with Multi30k's .gz files (default: $MINITRANSFORMER_MULTI30K_DIR, else the "
                             "package's cache, downloading what is missing)")
    parser.add_argument("--out", type=Path, help="the JSON file (default: benchmarks/results/ablations-<device>.json, "
                                                 "ablations-quick.json with --quick)")
    parser.add_argument("--no-figure", action="store_true", help="write no PNG")
    parser.add_argument("--page", "--readme", dest="page", type=Path,
                        help="also rewrite the generated results section of this page (docs/ablations.md) from the "
                             "JSON; --readme is its old name")
    parser.add_argument("--pilot-note", default=PILOT, help="a note stored in the JSON: why this task and size "
                                                         "(default: the pilot runs of the CPU suite)")
    parser.add_argument("--summarize-only", action="store_true",
                        help="run no job: write the JSON and figure from the jobs already in the partial file "
                             "(e.g. while the suite runs, or to commit an unfinished suite)")
    args = parser.parse_args(argv)

    device_kind = args.device.split(":")[0]
    if device_kind not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device!r}")
    if device_kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda was asked for, but torch.cuda.is_available() is False on this machine")
    size_name = args.size or ("quick" if args.quick else "base" if device_kind == "cuda" else "cpu")
    size = SIZES[size_name]
    names = args.variants or (list(QUICK_VARIANTS) if args.quick else list(VARIANTS))
    default_seeds = 2 if args.quick else 3 if device_kind == "cuda" else 5
    seeds = list(range(args.seeds if args.seeds is not None else default_seeds))
    if not seeds:
        parser.error("--seeds must be at least 1")
    jobs = args.jobs or (1 if device_kind == "cuda" else 2)
    if jobs < 1:
        parser.error(f"--jobs must be at least 1, got {jobs}")
    out = args.out or HERE / "benchmarks" / "results" / (
        "ablations-quick.json" if args.quick else f"ablations-{device_kind}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.jsonl")
    key = {"size": size.to_dict(), "device": device_kind, "data": "multi30k de-en"}

    # SIGTERM (kill, a scheduler) unwinds like Ctrl-C, so that the pool's processes are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    commit = _git_commit()  # of the code that runs now (HEAD may move while a long suite runs)
    loads = [os.getloadavg()]
    done = read_partial(partial, key)
    finished = {(r["variant"], r["seed"]) for r in done}
    # Seed by seed, so that an interrupted suite has every variant at the same seeds (the comparisons pair them).
    order = [(n, s) for s in seeds for n in names]
    todo = [] if args.summarize_only else [job for job in order if job not in finished]
    print(f"ablations: size {size_name}, {len(names)} variants x {len(seeds)} seeds, {len(todo)} jobs to run "
          f"({len(finished & set(order))} found in {partial.name}), {jobs} at a time on {args.device}; "
          f"load average {loads[0][0]:.2f}", flush=True)
    init = (size.to_dict(), args.data_dir, args.device, args.threads)
    count = 0
    import torch

    threads = torch.get_num_threads()
    if todo:
        if jobs == 1:
            init_worker(*init)
            results = map(run_worker_job, todo)
            pool = None
        else:
            pool = multiprocessing.get_context("spawn").Pool(jobs, init_worker, init)
            results = pool.imap_unordered(run_worker_job, todo)
        try:
            for result in results:
                result["commit"] = commit
                result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                result["load_average"] = list(os.getloadavg())
                append_partial(partial, key, result)
                done.append(result)
                count += 1
                loads.append(os.getloadavg())
                ppl = "diverged" if result["ppl"] is None else f"ppl {result['ppl']:.2f}"
                print(f"[{count}/{len(todo)}] {result['variant']} seed {result['seed']}: {ppl}, "
                      f"BLEU {result['bleu']:.2f}, {result['seconds']:.0f} s; load {loads[-1][0]:.2f}", flush=True)
        finally:
            if pool is not None:
                pool.terminate()
                pool.join()
            torch.set_num_threads(threads)
    records = [r for r in done if r["variant"] in names and r["seed"] in seeds]

    report = {
        "description": "Ablations of the Transformer recipe (lesson 10): baseline and one change per variant, "
                       "trained for a fixed number of steps on Multi30k de->en; validation perplexity (plain NLL "
                       "per BPE token, all scored pairs) and sacreBLEU (greedy) on the first bleu_sentences "
                       "validation pairs",
        "command": " ".join(["python -m benchmarks.ablations", *(argv if argv is not None else sys.argv[1:])]),
        "commit": commit,
        "commits_of_the_runs": sorted({str(r.get("commit")) for r in records}),
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                    "device": args.device,
                    "gpu": torch.cuda.get_device_name(0) if device_kind == "cuda" else None},
        # Over this invocation's samples and the load stored with each job (a resumed suite spans several).
        "load_average": {"start": loads[0], "end": loads[-1],
                         "mean_1min": _mean([x[0] for x in loads] + [r["load_average"][0] for r in records
                                                                      if "load_average" in r])},
        "jobs_at_a_time": jobs, "threads_per_job": args.threads,
        "wall_seconds_this_invocation": time.perf_counter() - started,
        "first_job_finished_at": min((r["finished_at"] for r in records if "finished_at" in r), default=None),
        "last_job_finished_at": max((r["finished_at"] for r in records if "finished_at" in r), default=None),
        "job_seconds_total": sum(r["seconds"] for r in records),
        "size_name": size_name, "size": size.to_dict(), "seeds": seeds, "variants": names,
        "pilot": args.pilot_note,
        "summary": summarize(records, [n for n in names if any(r["variant"] == n for r in records)]),
        "runs": sorted(records, key=lambda r: (names.index(r["variant"]), r["seed"])),
        "complete": len(records) == len(names) * len(seeds),
    }
    # The paired comparisons behind lesson 10's verdicts (minitransformer.ablation_stats), stored so that
    # the table of docs/ablations.md is written from the JSON alone.
    from minitransformer.ablation_stats import ALPHA, CONFIDENCE, analyse

    report["statistics"] = {
        "method": "paired by seed: per-seed difference of log perplexity (a ratio) and of BLEU from the "
                  "reference; Student-t confidence interval; two-sided paired t-test; Holm's correction over "
                  "every (variant, metric) comparison of the suite",
        "alpha": ALPHA, "confidence": CONFIDENCE, "spread": "± is the sample standard deviation over seeds (ddof 1)",
        "comparisons": analyse(report)}
    atomic_write(out, lambda handle: handle.write(json.dumps(report, indent=1).encode()))
    print(f"wrote {out} ({len(records)} of {len(names) * len(seeds)} jobs)", flush=True)
    if args.page is not None:
        from tools.write_docs import update_ablation_page

        changed = update_ablation_page(args.page, report)
        print(f"{'rewrote' if changed else 'unchanged:'} the ablation section of {args.page}", flush=True)
    if not args.no_figure:
        from minitransformer.ablation_report import save_ablation_figure

        png = save_ablation_figure(report, out.with_suffix(".png"))
        print(f"wrote {png}", flush=True)
    return report


if __name__ == "__main__":
    main()
