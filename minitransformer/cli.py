"""The command line: ``python -m minitransformer train | translate | attention | average | grade``.

    python -m minitransformer train                         # small model on dates, a few minutes on a CPU
    python -m minitransformer train --dataset multi30k      # the paper's base model (for a GPU)
    torchrun --nproc_per_node=4 -m minitransformer train --dataset multi30k
    python -m minitransformer translate --checkpoint runs/dates "Friday, March 3, 2023"
    python -m minitransformer translate --checkpoint runs/multi30k --beam 4 < sentences.de
    python -m minitransformer attention --checkpoint runs/dates "Friday, March 3, 2023" --out maps/
    python -m minitransformer average --checkpoints runs/multi30k --last 5 --out runs/multi30k/averaged.pt
    python -m minitransformer grade submissions/
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .training.options import DATASETS, PRECISIONS, PRESETS, RECIPES

_UNSET = object()
_SIZES = ("d_model", "n_heads", "d_ff", "layers", "dropout")


def _recipe(name: str) -> str:
    values = [f"{d}: {RECIPES[d][name]}" for d in DATASETS if name in RECIPES[d]]
    if not values:
        return ""
    if name in _SIZES and len(values) < len(DATASETS):
        values.append("otherwise the preset's")
    return f" (default by dataset: {', '.join(values)})"


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """Add every option of ``train`` (one per field of :class:`TrainOptions`)."""
    data = p.add_argument_group("data")
    data.add_argument("--dataset", choices=DATASETS, default="dates",
                      help="dates (generated with Babel), multi30k (downloaded, checked, cached) or text "
                           "(your own parallel files) (default: dates)")
    data.add_argument("--src-locale", default="en_US", help="dates: CLDR locale of the source (default: en_US)")
    data.add_argument("--tgt-locale", default="de_DE", help="dates: CLDR locale of the target, e.g. de_DE, hu_HU, "
                                                            "fr_FR (default: de_DE)")
    data.add_argument("--src-lang", default="de", choices=("de", "en"), help="multi30k: source language (default: de)")
    data.add_argument("--tgt-lang", default="en", choices=("de", "en"), help="multi30k: target language (default: en)")
    data.add_argument("--data-dir", help="multi30k: folder with its .gz files (default: "
                                         "$MINITRANSFORMER_MULTI30K_DIR, else ~/.cache/minitransformer/multi30k)")
    for split, what in (("", "training"), ("valid-", "validation"), ("test-", "test (optional)")):
        data.add_argument(f"--{split}src-file", help=f"text: {what} source sentences, one per line (plain or .gz)")
        data.add_argument(f"--{split}tgt-file", help=f"text: {what} target sentences, line-aligned with the source")
    data.add_argument("--train-size", type=int, help="dates: number of training dates; multi30k/text: use only the "
                                                     "first N training pairs" + _recipe("train_size"))
    data.add_argument("--vocab-size", type=int, help="largest shared BPE vocabulary, special tokens included"
                                                     + _recipe("vocab_size"))
    model = p.add_argument_group("model (a preset, then any size given here)")
    model.add_argument("--preset", choices=PRESETS,
                       help="model sizes of TransformerConfig.<preset>()" + _recipe("preset"))
    model.add_argument("--d-model", type=int, help="width of the model, d_model" + _recipe("d_model"))
    model.add_argument("--n-heads", type=int, help="attention heads, h" + _recipe("n_heads"))
    model.add_argument("--d-ff", type=int, help="inner width of the feed-forward network, d_ff" + _recipe("d_ff"))
    model.add_argument("--layers", type=int, help="layers N of the encoder and of the decoder" + _recipe("layers"))
    model.add_argument("--dropout", type=float, help="dropout P_drop" + _recipe("dropout"))
    model.add_argument("--norm-first", action=argparse.BooleanOptionalAction, default=None,
                       help="pre-LN layers, a departure from the paper's post-LN (default: post-LN)")
    run = p.add_argument_group("training")
    run.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps "
                                                      "(default: auto)")
    run.add_argument("--precision", choices=PRECISIONS, default="auto",
                     help="fp32, or bf16 autocast; auto is bf16 on a CUDA GPU that supports it (default: auto)")
    run.add_argument("--compile", action="store_true", help="wrap the model in torch.compile (best on a GPU)")
    run.add_argument("--batch-tokens", type=int, help="token budget of each side of a batch, padding included; "
                                                      "the paper used ~25000" + _recipe("batch_tokens"))
    run.add_argument("--accumulate", type=int, default=1, help="batches whose gradients add up before each "
                                                               "optimizer step (default: 1)")
    run.add_argument("--epochs", type=int, help="passes over the training data" + _recipe("epochs"))
    run.add_argument("--max-steps", type=int, help="stop after this many optimizer steps (with --epochs, "
                                                   "whichever comes first; alone, no epoch limit)")
    run.add_argument("--time-budget", type=float, help="stop after the step that passes this many seconds of "
                                                       "training (compilation and validation included)")
    run.add_argument("--warmup", type=int, help="warm-up steps of the learning rate (paper: 4000)" + _recipe("warmup"))
    run.add_argument("--lr-factor", type=float, help="lr = factor * d_model^-0.5 * min(step^-0.5, "
                                                     "step * warmup^-1.5)" + _recipe("lr_factor"))
    run.add_argument("--label-smoothing", type=float, default=0.1, help="epsilon of label smoothing (default: 0.1)")
    run.add_argument("--clip-norm", type=float, default=1.0, help="clip the gradient norm to this; 0: no clipping "
                                                                  "(default: 1.0)")
    run.add_argument("--target", type=float,
                     help="stop once the validation exact match (0-1) or BLEU reaches this; 0: never"
                          + _recipe("target"))
    run.add_argument("--eval-sentences", type=int, help="validation (after each epoch) and test (at the end) "
                                                        "sentences translated for the quality figure (default: all)")
    run.add_argument("--seed", type=int, default=0, help="seed of initialisation, dropout and batch order (default: 0)")
    files = p.add_argument_group("output")
    files.add_argument("--out", help="output folder for checkpoints, log.jsonl, loss.png, tokenizer.json "
                                     "(default: runs/<dataset>)")
    files.add_argument("--resume", nargs="?", const="auto", help="continue from the newest checkpoint of --out, or "
                                                                 "of the given checkpoint file or run folder")
    files.add_argument("--overwrite", action="store_true", help="start afresh in an --out folder that holds "
                                                                "checkpoints of an earlier run (replaced once the "
                                                                "new run has written its first checkpoint)")
    files.add_argument("--log-every", type=int, default=10, help="steps between records of log.jsonl (default: 10)")
    files.add_argument("--save-every", type=int, help="also write a checkpoint every N steps (default: at the end "
                                                      "of each epoch only)")
    files.add_argument("--keep", type=int, default=5, help="newest checkpoints kept (default: 5)")
    files.add_argument("--show", type=int, default=5, help="test translations printed at the end (default: 5)")
    files.add_argument("--test-beam", type=int, default=4, help="the test split is scored with greedy decoding and "
                                                                "with beam search of this size, length penalty 0.6 "
                                                                "(paper: 4); 1: greedy only (default: 4)")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m minitransformer``, with its three subcommands."""
    parser = argparse.ArgumentParser(prog="minitransformer", description="Train and use the Transformer of "
                                     "'Attention Is All You Need'.")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{train,translate,attention,average,grade}")
    train = commands.add_parser("train", help="train a model (default: a small one on dates, minutes on a CPU)",
                                description="Train a Transformer. With no options: a small model on English -> "
                                "German dates, on this machine. Under torchrun: one process per GPU (or CPU "
                                "process with gloo), DistributedDataParallel.")
    add_train_arguments(train)
    translate = commands.add_parser("translate", help="translate sentences with a trained checkpoint",
                                    description="Translate with greedy decoding or beam search (--beam 4); "
                                    "reads lines from standard input when no text is given.")
    translate.add_argument("text", nargs="*", help="sentences to translate (default: lines of standard input)")
    translate.add_argument("--checkpoint", required=True,
                           help="checkpoint file, or a run folder (its best.pt, else its newest checkpoint)")
    translate.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default: auto)")
    translate.add_argument("--batch-size", type=int, default=64, help="sentences decoded together (default: 64)")
    translate.add_argument("--beam", type=int, default=1, help="beam size; 1 is greedy decoding, the paper used 4 "
                                                              "(default: 1)")
    translate.add_argument("--alpha", type=float, default=0.6, help="length penalty of beam search (paper: 0.6)")
    translate.add_argument("--extra-length", type=int, default=50, help="output tokens allowed beyond the source "
                                                                       "length (default: 50)")
    attention = commands.add_parser("attention", help="draw a trained model's attention maps for one sentence",
                                    description="Write PNG files of the encoder self-attention, the decoder "
                                    "self-attention and the cross-attention of every layer, a panel per head, "
                                    "with token labels. The decoder reads the model's own greedy translation "
                                    "unless --target is given.")
    attention.add_argument("text", help="the source sentence")
    attention.add_argument("--checkpoint", required=True,
                           help="checkpoint file, or a run folder (its best.pt, else its newest checkpoint)")
    attention.add_argument("--target", help="target sentence fed to the decoder (default: the model's translation)")
    attention.add_argument("--out", default="attention", help="folder for the PNG files (default: attention)")
    attention.add_argument("--kinds", nargs="+", choices=("encoder", "decoder_self", "cross"),
                           default=["encoder", "decoder_self", "cross"], help="which maps to draw (default: all)")
    attention.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default: auto)")
    average = commands.add_parser("average", help="average the weights of the last k checkpoints (paper, 6.1)",
                                  description="Average the model weights of several checkpoints of one run "
                                  "into a new checkpoint (for translating; it cannot resume training).")
    average.add_argument("--checkpoints", nargs="+", required=True,
                         help="checkpoint files, or a run folder (all its checkpoints, or the --last K)")
    average.add_argument("--last", type=int, help="average only the newest K of the given checkpoints")
    average.add_argument("--out", required=True, help="file to write the averaged checkpoint to (never a "
                                                      "training checkpoint of a run)")
    average.add_argument("--force", action="store_true", help="replace --out if it exists (never a training "
                                                              "checkpoint)")
    commands.add_parser("grade", help="grade exercise notebooks; EXECUTES the submitted code (see: minitransformer "
                        "grade --help)", description="Grade exercise notebooks; the options are those of "
                        "python -m minitransformer.grading.")
    return parser


def _given_train_arguments(argv: Sequence[str]) -> dict[str, Any]:
    """The ``train`` options written on the command line (not defaulted)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_train_arguments(parser)
    namespace = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions})
    parsed = parser.parse_args(list(argv), namespace=namespace)
    return {k: v for k, v in vars(parsed).items() if v is not _UNSET}


def _train_options(args: argparse.Namespace, argv: Sequence[str]) -> Any:
    from .training import TrainOptions, latest_checkpoint, load_checkpoint

    values = {k: v for k, v in vars(args).items() if k != "command"}
    if args.resume:
        # Options not written again on the command line come from the run being resumed.
        given = _given_train_arguments(argv)
        place = args.resume
        if place == "auto":
            place = args.out or f"runs/{args.dataset}"
        path = latest_checkpoint(place)
        values = {**load_checkpoint(path).get("options", {}), **given, "resume": str(path)}
    return TrainOptions.from_dict(values)


def _run_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .training import train

    result = train(_train_options(args, argv))
    if result.checkpoint is not None:
        print(f"checkpoint: {result.checkpoint}   log: {result.out / 'log.jsonl'}   curve: {result.out / 'loss.png'}"
              f"   ({result.seconds:.0f} s)")
    return 130 if result.interrupted else 0


def _run_translate(args: argparse.Namespace) -> int:
    from .evaluation import translate_sentences
    from .training import load_model
    from .utils import get_device

    device = get_device(None if args.device == "auto" else args.device)
    model, tokenizer, _ = load_model(args.checkpoint, device)
    sentences = args.text or [line.rstrip("\n") for line in sys.stdin]
    for line in translate_sentences(model, tokenizer, sentences, device, args.batch_size, args.extra_length,
                                    beam_size=args.beam, alpha=args.alpha):
        print(line, flush=True)
    return 0


def _run_attention(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    from .inspection import save_attention_maps, sentence_attention
    from .training import load_model
    from .utils import get_device

    device = get_device(None if args.device == "auto" else args.device)
    model, tokenizer, _ = load_model(args.checkpoint, device)
    attention = sentence_attention(model, tokenizer, args.text, args.target, device)
    paths = save_attention_maps(attention, args.out, tuple(args.kinds))
    print(f"{args.text}  ->  {attention.translation}")
    print(f"wrote {len(paths)} figures to {args.out}: {', '.join(p.name for p in paths)}")
    return 0


def _run_average(args: argparse.Namespace) -> int:
    from .training import atomic_torch_save, average_checkpoints, list_checkpoints
    from .training.checkpoint import check_average_target
    from .utils import writable_folder

    target = check_average_target(args.out, force=args.force)
    writable_folder(target.parent, "the folder of --out")
    paths: list[Path] = []
    for item in args.checkpoints:
        item = Path(item)
        if item.is_dir():
            found = list_checkpoints(item)
            if not found:
                raise FileNotFoundError(f"the folder {item} holds no checkpoint-<step>.pt files")
            paths.extend(found)
        elif item.is_file():
            paths.append(item)
        else:
            raise FileNotFoundError(f"no checkpoint file or run folder at {item}")
    if args.last is not None:
        if args.last < 1 or args.last > len(paths):
            raise ValueError(f"--last must be between 1 and the {len(paths)} checkpoints given, got {args.last}")
        paths = paths[-args.last :]
    out = atomic_torch_save(average_checkpoints(paths), target)
    print(f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (130 after Ctrl-C, 2 after an error).

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).
    """
    from .training import CheckpointError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["grade"]:
        # The grader has its own parser (python -m minitransformer.grading --help).
        from .grading import main as grade

        return grade(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            return _run_train(args, argv[1:])
        if args.command == "translate":
            return _run_translate(args)
        if args.command == "attention":
            return _run_attention(args)
        return _run_average(args)
    except (CheckpointError, OSError, ValueError) as error:
        print(f"minitransformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
