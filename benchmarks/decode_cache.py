"""Greedy decoding of 64 tokens with the base model's shape, with and without the key/value cache.

Usage: python -m benchmarks.decode_cache [--tokens 64] [--batch 1 8] [--vocab 8000] [--repeats 3]

Prints the best-of-N wall time of each, per batch size, and the speed-up. The model is
untrained (random weights): decoding cost does not depend on what the weights say, and an
end-token id outside the vocabulary makes every run generate exactly ``--tokens`` tokens.

Without the cache, step t runs the decoder over all t tokens; with it, over one. For one
sentence on a CPU, each step is dominated by reading the decoder's ~100 MB of weights, which
both paths pay, so the gain is smallest there; with a batch, the recomputed work dominates.
"""

from __future__ import annotations

import argparse
import time

import torch

from minitransformer import Transformer, TransformerConfig, greedy_decode, set_seed


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=64, help="tokens to generate (default 64)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8],
                        help="sentences decoded together; several sizes give several rows (default 1 8)")
    parser.add_argument("--src-len", type=int, default=30, help="source length (default 30)")
    parser.add_argument("--vocab", type=int, default=8000, help="shared vocabulary size (default 8000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant; the fastest counts (default 3)")
    args = parser.parse_args()

    set_seed(0)
    model = Transformer(TransformerConfig.base(args.vocab)).eval()
    print(f"base model shape (d_model=512, 6+6 layers, V={args.vocab}), source {args.src_len} tokens, "
          f"{args.tokens} new tokens, {torch.get_num_threads()} CPU threads, best of {args.repeats}")
    print(f"{'batch':>5}  {'without cache':>14}  {'with cache':>11}  {'speed-up':>8}")
    for batch in args.batch:
        src = torch.randint(4, args.vocab, (batch, args.src_len))
        outputs = {}

        def run(use_cache: bool) -> None:
            outputs[use_cache] = greedy_decode(model, src, args.tokens, bos_id=1, eos_id=None, use_cache=use_cache)

        run(True)  # warm-up
        with_cache = best_time(lambda: run(True), args.repeats)
        without_cache = best_time(lambda: run(False), args.repeats)
        assert torch.equal(outputs[True], outputs[False]), "cached and uncached decoding disagree"
        print(f"{batch:>5}  {without_cache:>12.3f} s  {with_cache:>9.3f} s  {without_cache / with_cache:>7.2f}x")

if __name__ == "__main__":
    main()
