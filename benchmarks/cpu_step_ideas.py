"""What each speed idea buys the laptop translator: one training step of the small model, timed on this CPU.

Usage:
    python -m benchmarks.cpu_step_ideas                          # every idea, 3 rounds, about 3 minutes
    python -m benchmarks.cpu_step_ideas --ideas base dropout_0 --rounds 2 --steps 2 --json out.json

The baseline is one step of ``train --dataset multi30k`` on a machine without a CUDA GPU: the
``small`` preset (d_model 256, 3+3 layers) on a batch of 4,096 tokens per side (sentences of 16
tokens, as Multi30k's average after BPE), forward, label-smoothed loss, backward and Adam
(``benchmarks.harness.time_training_steps``, the harness of the GPU comparison), with the
recipe's thread count. Each idea changes one thing. The ideas take turns within
each round (the order flips every round), and the fastest round of each counts, which evens out
other programs on a shared machine. Printed per idea: seconds per step, target tokens per second,
and the speed-up over the baseline; ``--json`` writes the same with the machine and its load.
Quality is not measured here: an idea that is faster per token may still need more tokens
(``benchmarks/multi30k_cpu.py`` measures BLEU against time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import StepTiming, synthetic_batches, time_training_steps
from minitransformer import Transformer, TransformerConfig, set_seed

REPO_ROOT = Path(__file__).resolve().parents[1]

LENGTH = 16

#: name -> (what changes, model overrides, vocabulary, tokens per side, threads or None, compile)
IDEAS: dict[str, tuple[str, dict[str, Any], int, int, int | None, bool]] = {
    "base": ("the recipe: small preset, V=8000, 4,096 tokens, every core", {}, 8000, 4096, None, False),
    "one_thread": ("one thread instead of every core", {}, 8000, 4096, 1, False),
    "dropout_0": ("no dropout", {"dropout": 0.0}, 8000, 4096, None, False),
    "vocab_4000": ("a BPE vocabulary of 4,000 (smaller output layer)", {}, 4000, 4096, None, False),
    "batch_8192": ("batches of 8,192 tokens per side", {}, 8000, 8192, None, False),
    "d_ff_512": ("d_ff 512 instead of 1,024", {"d_ff": 512}, 8000, 4096, None, False),
    "compiled": ("torch.compile (Inductor, CPU); compile time reported apart", {}, 8000, 4096, None, True),
}


def make_model(name: str) -> tuple[Any, list[Any]]:
    """The model (compiled when the idea says so) and its one synthetic batch for idea ``name``."""
    _, overrides, vocab, tokens, _, compiled = IDEAS[name]
    set_seed(0)
    model = Transformer(TransformerConfig.small(vocab, **overrides))
    return (torch.compile(model) if compiled else model), synthetic_batches(vocab, tokens, LENGTH, count=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ideas", nargs="+", choices=tuple(IDEAS), default=list(IDEAS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the fastest of each idea counts (default 3)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per idea and round (default 3)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if "base" not in args.ideas:
        args.ideas = ["base", *args.ideas]
    cores = torch.get_num_threads()
    load_before = os.getloadavg()[0]
    models = {name: make_model(name) for name in args.ideas}
    best: dict[str, StepTiming] = {}
    first_step: dict[str, float] = {}  # the untimed first step of each idea (compilation included)
    for r in range(args.rounds):
        for name in (args.ideas if r % 2 == 0 else args.ideas[::-1]):
            torch.set_num_threads(IDEAS[name][4] or cores)
            module, batches = models[name]
            timing = time_training_steps(module, batches, torch.device("cpu"), steps=args.steps,
                                         warmup=1 if r == 0 else 0)
            first_step.setdefault(name, timing.first_steps_seconds)
            if name not in best or timing.seconds_per_step < best[name].seconds_per_step:
                best[name] = timing
    torch.set_num_threads(cores)
    print(f"{platform.processor() or platform.machine()}, {cores} threads by default, torch {torch.__version__}, "
          f"load average {load_before:.1f} at the start; best of {args.rounds} rounds x {args.steps} steps")
    print(f"{'idea':<12} {'s/step':>7} {'tgt tok/s':>10} {'speed-up':>9}  what changes")
    rows = []
    for name in args.ideas:
        rate, base = best[name].tgt_tokens_per_s, best["base"].tgt_tokens_per_s
        extra = f" (compiled in {first_step[name]:.0f} s)" if IDEAS[name][5] else ""
        print(f"{name:<12} {best[name].seconds_per_step:>7.3f} {rate:>10,.0f} {rate / base:>8.2f}x  "
              f"{IDEAS[name][0]}{extra}")
        rows.append({"idea": name, "what": IDEAS[name][0], "seconds_per_step": best[name].seconds_per_step,
                     "tgt_tokens_per_s": rate, "speedup": rate / base,
                     "first_step_seconds": first_step[name]})
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": " ".join(["python", "-m", "benchmarks.cpu_step_ideas", *sys.argv[1:]]),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
                        "threads_default": cores},
            "load_average": {"start": load_before, "end": os.getloadavg()[0]},
            "rounds": args.rounds, "steps": args.steps, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
