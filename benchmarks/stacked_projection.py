"""Three Q/K/V projections against one stacked (3D, D) projection: forward and backward, on this machine.

Usage: python -m benchmarks.stacked_projection [--sizes 256 512] [--rows 768] [--threads 1] [--repeats 15]
                                               [--json FILE]

``nn.MultiheadAttention`` keeps W_Q, W_K and W_V stacked in one ``in_proj_weight`` of shape
(3D, D), so self-attention makes one matrix product instead of three. Our
:class:`~minitransformer.MultiHeadAttention` keeps three ``nn.Linear`` (the three matrices of
lesson 04). This script measures whether stacking would make a training step faster: for each
width D it times, on ``rows`` token vectors (768 = the comparison benchmark's batch of 32 x 24),
the three products plus the backward pass, and the stacked product (its weight concatenated at
each call, as a module that keeps three parameters would have to) plus the backward pass,
taking turns (:func:`benchmarks.harness.alternate`), and prints the fastest of
``repeats`` turns of each and the ratio. Both compute the same numbers (checked before timing).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from benchmarks.harness import alternate

REPO_ROOT = Path(__file__).resolve().parents[1]


def best_of(fn: Callable[[], None], repeats: int) -> float:
    """The fastest of ``repeats`` calls, in seconds (after one untimed call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(width: int, rows: int, repeats: int) -> dict[str, float]:
    """Seconds per forward + backward of three (rows, D) x (D, D) products and of one (rows, D) x (D, 3D)."""
    generator = torch.Generator().manual_seed(width)
    x = torch.randn(rows, width, generator=generator, requires_grad=True)  # (N, D)
    weights = [torch.randn(width, width, generator=generator, requires_grad=True) for _ in range(3)]  # 3 x (D, D)
    biases = [torch.randn(width, generator=generator, requires_grad=True) for _ in range(3)]  # 3 x (D,)

    def three() -> list[torch.Tensor]:
        return [F.linear(x, w, b) for w, b in zip(weights, biases)]  # 3 x (N, D)

    def stacked() -> list[torch.Tensor]:
        return list(F.linear(x, torch.cat(weights), torch.cat(biases)).split(width, dim=-1))  # (N, 3D) -> 3 x (N, D)

    with torch.no_grad():
        for a, b in zip(three(), stacked()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)

    def step(project: Callable[[], list[torch.Tensor]]) -> Callable[[], None]:
        def run() -> None:
            sum(out.sum() for out in project()).backward()
            for t in (x, *weights, *biases):
                t.grad = None
        return run

    # Two rounds, taking turns in flipped order, as the model comparisons do.
    times = alternate({"three": lambda: best_of(step(three), repeats),
                       "stacked": lambda: best_of(step(stacked), repeats)}, 2)
    return {name: min(found) for name, found in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512], help="widths D (default 256 512)")
    parser.add_argument("--rows", type=int, default=768, help="token vectors per product (default 768)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per turn (default 15)")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()
    if min(args.sizes) < 1 or args.rows < 1 or args.threads < 1 or args.repeats < 1:
        parser.error(f"sizes, --rows, --threads and --repeats must be >= 1, got {args.sizes}, {args.rows}, "
                     f"{args.threads}, {args.repeats}")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rows} rows, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'D':>5} {'three (ms)':>11} {'stacked (ms)':>13} {'three / stacked':>16}")
    results = []
    for width in args.sizes:
        found = measure(width, args.rows, args.repeats)
        ratio = found["three"] / found["stacked"]
        print(f"{width:>5} {1e3 * found['three']:>11.2f} {1e3 * found['stacked']:>13.2f} {ratio:>15.2f}x")
        results.append({"d_model": width, "three_s": found["three"], "stacked_s": found["stacked"], "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "rows": args.rows,
                       "load": os.getloadavg()[0], "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
