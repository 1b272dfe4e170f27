"""Our Transformer against torch.nn.Transformer holding the same weights: training and inference, side by side.

Usage: python -m benchmarks.compare_torch [--sizes dates d256 base] [--threads 1 2] [--device cpu]
                                          [--compile] [--quick] [--json benchmarks/results/compare-cpu.json]

For each size and thread count (on a GPU: eager, and compiled with --compile), two measurements:

* training step: forward, label-smoothed loss, backward and an Adam step on the same padded
  batches (source + target tokens per second, padding excluded);
* inference: encode plus greedy decoding of 32 tokens, batch 1 and batch 32 (generated tokens
  per second): ours with the key/value cache, nn.Transformer re-running its decoder over
  all tokens so far at each step, as a user of nn.Transformer would write it.

The two models take turns (ours, theirs, theirs, ours, ...) and the fastest turn of each
counts: on a shared machine, the least disturbed turn is the closest to the real speed, and
taking turns gives both the same chances. The load average is printed before and after:
compare results only with runs made at a similar load. Ratio = ours / nn.Transformer
(above 1: ours is faster). The JSON holds every turn, not only the best.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import side_by_side_decoding, side_by_side_training, synthetic_batches
from minitransformer import Transformer, TransformerConfig, set_seed

REPO_ROOT = Path(__file__).resolve().parents[1]

#: name -> (config overrides of TransformerConfig.base, vocabulary, batch tokens, padded length,
#: training (repeats, timed steps), inference (repeats, untimed first run)). "dates" is the default
#: ``train`` model; d256 is the issue's reference size; "base" is the paper's Table 3, its turns kept
#: few: on one busy CPU core nn.Transformer takes about a minute to decode 32 tokens for 32 sentences.
SIZES: dict[str, dict[str, Any]] = {
    "dates": dict(config=dict(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0),
                  vocab=1000, batch_tokens=2000, length=16, train=(5, 10), infer=(5, True)),
    "d256": dict(config=dict(d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3),
                 vocab=8000, batch_tokens=768, length=24, train=(5, 4), infer=(3, True)),
    "base": dict(config=dict(), vocab=8000, batch_tokens=768, length=24, train=(2, 2), infer=(2, False)),
}
#: The --quick sizes, for the test: everything tiny, one turn each.
QUICK = dict(config=dict(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1),
             vocab=50, batch_tokens=64, length=8, train=(1, 1), infer=(1, True))
NEW_TOKENS = 32
DECODE_BATCHES = (1, 32)


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (all zero where the system does not say)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return [0.0, 0.0, 0.0]


def measure(name: str, spec: dict[str, Any], device: torch.device, mode: str) -> list[dict[str, Any]]:
    """Training and inference records of one size in the current thread setting."""
    set_seed(0)
    config = TransformerConfig.base(spec["vocab"], **spec["config"])
    model = Transformer(config)
    batches = synthetic_batches(spec["vocab"], spec["batch_tokens"], spec["length"], count=3)
    compile = mode == "compiled"
    repeats, steps = spec["train"]
    base = {"size": name, "device": device.type, "mode": mode, "threads": torch.get_num_threads()}
    records = []
    found = side_by_side_training(model, batches, device, repeats=repeats, steps=steps, compile=compile)
    records.append({**base, "task": "train", "batch": batches[0].src.shape[0], "length": spec["length"],
                    "repeats": repeats, "steps": steps, **found})
    print_row(records[-1])
    generator = torch.Generator().manual_seed(1)
    for batch in DECODE_BATCHES:
        src = torch.randint(4, spec["vocab"], (batch, spec["length"]), generator=generator)
        repeats, warmup = spec["infer"]
        found = side_by_side_decoding(model, src, device, new_tokens=NEW_TOKENS, repeats=repeats, warmup=warmup,
                                      compile=compile)
        records.append({**base, "task": f"greedy {NEW_TOKENS}", "batch": batch, "length": spec["length"],
                        "repeats": repeats, **found})
        print_row(records[-1])
    return records


def print_row(r: dict[str, Any]) -> None:
    where = f"{r['device']} {r['mode']}" + (f" {r['threads']}t" if r["device"] == "cpu" else "")
    print(f"{r['size']:>6}  {where:>14}  {r['task']:>9}  {r['batch']:>5}  {r['ours']:>11,.0f}  {r['torch']:>11,.0f}  "
          f"{r['ratio']:>6.2f}x  load {load()[0]:.1f}", flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=tuple(SIZES), default=list(SIZES),
                        help="model sizes (default: dates d256 base)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="CPU thread counts (default 1 2)")
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda (default auto)")
    parser.add_argument("--compile", action="store_true", help="also torch.compile both models (on a GPU)")
    parser.add_argument("--quick", action="store_true", help="tiny models, one turn each (for the tests)")
    parser.add_argument("--json", type=Path, help="write the results here (default: benchmarks/results/"
                                                  "compare-<device>.json; none with --quick)")
    args = parser.parse_args(argv)
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be >= 1, got {args.threads}")
    wanted = "cuda" if args.device == "auto" and torch.cuda.is_available() else \
        ("cpu" if args.device == "auto" else args.device)
    device = torch.device(wanted)
    modes = ["eager", "compiled"] if args.compile else ["eager"]
    before = load()
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {before[0]:.1f} {before[1]:.1f} {before[2]:.1f} (1, 5, 15 min); fastest of N turns, "
          "ours and nn.Transformer alternating")
    print(f"{'size':>6}  {'where':>14}  {'task':>9}  {'batch':>5}  {'ours tok/s':>11}  {'torch tok/s':>11}  "
          f"{'ratio':>7}")
    threads_before = torch.get_num_threads()
    records: list[dict[str, Any]] = []
    start = time.perf_counter()
    path = args.json or (None if args.quick else REPO_ROOT / "benchmarks" / "results" / f"compare-{device.type}.json")

    def result(complete: bool) -> dict[str, Any]:
        return {"torch": torch.__version__, "device": str(device), "cpus": os.cpu_count(),
                "load_before": before, "load_after": load(), "seconds": round(time.perf_counter() - start, 1),
                "new_tokens": NEW_TOKENS, "quick": args.quick, "complete": complete, "records": records}

    def write(complete: bool) -> None:  # after every size: an interrupted run keeps what it measured
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result(complete), indent=1) + "\n")

    try:
        for name in args.sizes:  # sizes outermost: the slow base model comes last
            for threads in (args.threads if device.type == "cpu" else [threads_before]):
                torch.set_num_threads(threads)
                for mode in modes:
                    records.extend(measure(name, QUICK if args.quick else SIZES[name], device, mode))
                write(complete=False)
    finally:
        torch.set_num_threads(threads_before)
    final = result(complete=True)
    write(complete=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in final['load_after'])}; "
          f"{final['seconds']:.0f} s in all" + (f"; wrote {path}" if path else ""))
    return final


if __name__ == "__main__":
    main()
