"""Padding of token-budget batches on Multi30k, shuffled against sorted by length (lesson 07, section 2).

Usage: python -m benchmarks.padding [--data-dir DIR] [--vocab 8000] [--batch-tokens 4096] [--out FILE]

Trains (or reloads from the cache) the Multi30k recipe's shared BPE vocabulary on the training
pairs, encodes them, and cuts one epoch into batches with ``TokenBatchSampler`` twice: shuffled
and cut as they come (``bucket=False``), and sorted by length first (the default). Prints the
number of batches and the share of padding cells of each, and writes them as JSON with ``--out``.
Needs the Multi30k files (downloaded on first use, or ``--data-dir``); runs on a CPU in about a minute.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from minitransformer.data import SharedTokenizer, TokenBatchSampler, load_multi30k, padding_fraction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder holding the Multi30k .gz files")
    parser.add_argument("--vocab", type=int, default=8000, help="largest BPE vocabulary (the recipe's 8,000)")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="token budget per side (the recipe's 4,096)")
    parser.add_argument("--out", default=None, help="write the results to this JSON file")
    args = parser.parse_args()

    pairs = load_multi30k("train", data_dir=args.data_dir)
    tokenizer = SharedTokenizer.cached(pairs, vocab_size=args.vocab)
    src_len = [len(x) for x in tokenizer.encode_batch([s for s, _ in pairs])]
    tgt_len = [len(x) for x in tokenizer.encode_batch([t for _, t in pairs])]
    results = {"dataset": "multi30k train (de -> en)", "pairs": len(pairs), "vocab_size": tokenizer.vocab_size,
               "batch_tokens": args.batch_tokens}
    for name, bucket in (("shuffled", False), ("sorted", True)):
        batches = list(TokenBatchSampler(src_len, tgt_len, args.batch_tokens, seed=0, bucket=bucket))
        results[name] = {"batches": len(batches), "padding_fraction": round(padding_fraction(batches, src_len, tgt_len), 4)}
        print(f"{name:<9} {len(batches):>5} batches, padding {results[name]['padding_fraction']:.1%}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
