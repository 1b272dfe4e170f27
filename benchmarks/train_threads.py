"""The default ``python -m minitransformer train``, quiet and next to a busy process, by thread count.

Usage: python -m benchmarks.train_threads [--threads 1 2] [--busy 1] [--skip-quiet] [--json out.json]

For each thread count it runs the default ``train`` (dates, the 0.25M-parameter model) as a
subprocess in a temporary folder, once on an otherwise quiet machine and once while ``--busy``
processes each spin one core (``while True: pass``), and prints the wall time and the test
exact match of each run. "default" is the run with no ``--threads`` option (the choice
``train`` makes itself; it prints it in its setup line).

Why: a small model's step is a few milliseconds of work split over several OpenMP threads,
which then wait for each other; when another process holds a core, every step waits for the
scheduler. One thread does not wait. docs/training.md ("How long training takes") shows the result.
The machine's load average is printed before each run: a run on a shared machine is only
comparable with runs made at the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def run_train(threads: str, out: Path) -> dict:
    """One default ``train`` run; returns its wall time, steps, test exact match and setup line.

    The number of steps is reported because it can differ between thread counts: the sums of a
    matrix product are added in another order with another number of threads, the weights drift
    apart in the last digits, and a validation figure just under the stop target (say 99.2% for
    100%) sends one run on for more epochs than the other. Seconds per step compare the speed.
    """
    command = [sys.executable, "-m", "minitransformer", "train", "--out", str(out)]
    if threads != "default":
        command += ["--threads", threads]
    env = dict(os.environ, TQDM_DISABLE="1", PYTHONPATH=str(HERE))
    env.pop("OMP_NUM_THREADS", None)  # the run must make its own choice
    load = os.getloadavg()[0]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"train failed ({result.returncode}):\n{result.stderr[-2000:]}")
    match = re.search(r"test, greedy: ([\d.]+)% exact match", result.stdout)
    model = next((line for line in result.stdout.splitlines() if line.startswith("model:")), "")
    steps = re.search(r"after ([\d,]+) steps", result.stdout)
    n_steps = int(steps.group(1).replace(",", "")) if steps else None
    return {"threads": threads, "seconds": round(seconds, 1), "load_before": round(load, 2), "steps": n_steps,
            "seconds_per_step": round(seconds / n_steps, 3) if n_steps else None,
            "test_exact_match": float(match.group(1)) if match else None, "model_line": model}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", nargs="+", default=["default", str(os.cpu_count() or 1)],
                        help="thread counts to compare; 'default' gives no --threads (default: default and "
                             "the number of cores, PyTorch's own choice)")
    parser.add_argument("--busy", type=int, default=1, help="CPU-bound processes running during the busy runs "
                                                            "(default 1)")
    parser.add_argument("--skip-quiet", action="store_true", help="only the busy runs")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-threads-") as folder:
        for busy in ([0] if not args.skip_quiet else []) + ([args.busy] if args.busy else []):
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                for threads in args.threads:
                    row = run_train(threads, Path(folder) / f"run-{busy}-{threads}")
                    row["busy_processes"] = busy
                    rows.append(row)
                    print(f"busy processes {busy}  threads {threads:>7}  {row['seconds']:6.1f} s  "
                          f"{row['steps']} steps ({row['seconds_per_step']} s/step, start-up included)  "
                          f"test exact match {row['test_exact_match']}%  (load before: {row['load_before']})",
                          flush=True)
            finally:
                for p in spinners:
                    p.kill()
                    p.wait()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
