"""A training step of our Transformer against torch.nn.Transformer, with the PyTorch profiler's view.

Usage: python -m benchmarks.step_profile [--sizes tiny small base] [--batch-tokens 1024] [--length 24]
                                         [--steps 10] [--repeats 3] [--vocab 8000] [--device cpu]
                                         [--bf16] [--compile] [--profile]

For each size, both models hold the same weights (``benchmarks.harness.TorchTransformer``)
and take the same training steps (forward, label-smoothed loss, backward, Adam) on the same
padded batches. Prints tokens per second of each (the best of --repeats rounds, the two
models taking turns, which evens out a busy machine) and the ratio ours / nn.Transformer
(above 1: ours is faster); with --profile, also the operators that cost the most in each model.
The gpu_profile command runs the same comparison at the base size on a GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from benchmarks.harness import TorchTransformer, compare_with_torch, profile_training_step, synthetic_batches
from minitransformer import Transformer, TransformerConfig, get_device, set_seed

REPO_ROOT = Path(__file__).resolve().parents[1]

#: d_model, n_heads, d_ff, layers of each size ("base" is the paper's Table 3).
SIZES = {"tiny": (64, 4, 256, 2), "small": (256, 4, 1024, 3), "base": (512, 8, 2048, 6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=tuple(SIZES), default=["tiny", "small"],
                        help="model sizes, one row each (default: tiny small)")
    parser.add_argument("--batch-tokens", type=int, default=1024, help="tokens per side of a batch (default 1024)")
    parser.add_argument("--length", type=int, default=24, help="padded sentence length (default 24)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the fastest of each model counts (default 3)")
    parser.add_argument("--vocab", type=int, default=8000, help="shared vocabulary size (default 8000)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda (default auto)")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    parser.add_argument("--profile", action="store_true", help="print the profiler's top operators of each model")
    args = parser.parse_args()

    device = get_device(None if args.device == "auto" else args.device)
    print(f"{device}, {torch.get_num_threads()} threads, batches of {args.batch_tokens} tokens per side "
          f"(width {args.length}), V={args.vocab}, {'bf16' if args.bf16 else 'fp32'}"
          f"{', compiled' if args.compile else ', eager'}, best of {args.repeats} x {args.steps} timed steps")
    print(f"{'size':>6}  {'ours tok/s':>11}  {'nn.Transformer tok/s':>20}  {'ours / theirs':>13}")
    for size in args.sizes:
        d_model, n_heads, d_ff, layers = SIZES[size]
        set_seed(0)
        config = TransformerConfig.base(args.vocab, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                                        n_encoder_layers=layers, n_decoder_layers=layers)
        model = Transformer(config)
        batches = synthetic_batches(args.vocab, args.batch_tokens, args.length, count=3)
        best = {"ours": 0.0, "torch": 0.0}
        for _ in range(args.repeats):
            found = compare_with_torch(model, batches, device, bf16=args.bf16, compile=args.compile,
                                       steps=args.steps, warmup=2)
            best = {name: max(best[name], found[name]["tokens_per_s"]) for name in best}
        print(f"{size:>6}  {best['ours']:>11,.0f}  {best['torch']:>20,.0f}  {best['ours'] / best['torch']:>12.2f}x",
              flush=True)
        if args.profile:
            for name, module in (("ours", model.to(device)), ("nn.Transformer", TorchTransformer(model).to(device))):
                print(f"\n{size}, {name}:")
                print(profile_training_step(module, batches[0], device, bf16=args.bf16))


if __name__ == "__main__":
    main()
