"""What each speed idea buys the laptop translator: one training step of the small model, timed on this CPU.

Usage:
    python benchmarks/cpu_step_ideas.py                          # every idea, 3 rounds, about 3 minutes
    python benchmarks/cpu_step_ideas.py --ideas base dropout_0 --rounds 2 --steps 2 --json out.json

The baseline is one step of ``train --dataset multi30k`` on a machine without a CUDA GPU: the
``small`` preset (d_model 256, 3+3 layers) on a batch of 4,096 tokens per side (sentences of 16
tokens, as Multi30k's average after BPE), forward, label-smoothed loss, backward, clipping and
Adam, with the recipe's thread count. Each idea changes one thing. The ideas take turns within
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from minitransformer import Transformer, TransformerConfig, set_seed  # noqa: E402
from minitransformer.profiling import synthetic_batches  # noqa: E402
from minitransformer.training import label_smoothed_nll  # noqa: E402

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


def make_step(name: str) -> tuple[Callable[[], None], int, float]:
    """A closure that runs one training step of idea ``name``; the target tokens per step; compile seconds."""
    _, overrides, vocab, tokens, _, compiled = IDEAS[name]
    set_seed(0)
    model = Transformer(TransformerConfig.small(vocab, **overrides))
    module: Any = torch.compile(model) if compiled else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    batch = synthetic_batches(vocab, tokens, LENGTH, count=1)[0]
    n_tgt = batch.n_tgt_tokens

    def step() -> None:
        logits = module(batch.src, batch.tgt_in)  # (B, T, V)
        loss, _, _ = label_smoothed_nll(logits, batch.tgt_out, 0.1, model.config.pad_id)
        (loss / n_tgt).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    started = time.perf_counter()
    step()  # warm-up (and compilation)
    return step, n_tgt, time.perf_counter() - started


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
    steps, tokens, compile_s = {}, {}, {}
    for name in args.ideas:
        torch.set_num_threads(IDEAS[name][4] or cores)
        steps[name], tokens[name], compile_s[name] = make_step(name)
    best = {name: float("inf") for name in args.ideas}
    for r in range(args.rounds):
        for name in (args.ideas if r % 2 == 0 else args.ideas[::-1]):
            torch.set_num_threads(IDEAS[name][4] or cores)
            started = time.perf_counter()
            for _ in range(args.steps):
                steps[name]()
            best[name] = min(best[name], (time.perf_counter() - started) / args.steps)
    torch.set_num_threads(cores)
    print(f"{platform.processor() or platform.machine()}, {cores} threads by default, torch {torch.__version__}, "
          f"load average {load_before:.1f} at the start; best of {args.rounds} rounds x {args.steps} steps")
    print(f"{'idea':<12} {'s/step':>7} {'tgt tok/s':>10} {'speed-up':>9}  what changes")
    rows = []
    for name in args.ideas:
        rate = tokens[name] / best[name]
        speedup = rate / (tokens["base"] / best["base"])
        extra = f" (compiled in {compile_s[name]:.0f} s)" if IDEAS[name][5] else ""
        print(f"{name:<12} {best[name]:>7.3f} {rate:>10,.0f} {speedup:>8.2f}x  {IDEAS[name][0]}{extra}")
        rows.append({"idea": name, "what": IDEAS[name][0], "seconds_per_step": best[name], "tgt_tokens_per_s": rate,
                     "speedup": speedup, "first_step_seconds": compile_s[name]})
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": " ".join(["python", "benchmarks/cpu_step_ideas.py", *sys.argv[1:]]),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
                        "threads_default": cores},
            "load_average": {"start": load_before, "end": os.getloadavg()[0]},
            "rounds": args.rounds, "steps": args.steps, "results": rows}, indent=1))


if __name__ == "__main__":
    main()
