"""The command line: ``python -m minitransformer train | translate | attention | average | export | workspace | download | grade``.

    python -m minitransformer train                         # small model on dates (docs/training.md: its time)
    python -m minitransformer train --dataset multi30k      # the paper's base model (for a GPU)
    torchrun --nproc_per_node=4 -m minitransformer train --dataset multi30k
    python -m minitransformer translate --checkpoint runs/dates "Friday, March 3, 2023"
    python -m minitransformer translate --checkpoint runs/multi30k --beam 4 < sentences.de
    python -m minitransformer attention --checkpoint runs/dates "Friday, March 3, 2023" --out maps/
    python -m minitransformer average --checkpoints runs/multi30k --last 5 --out runs/multi30k/averaged.pt
    python -m minitransformer export --checkpoint runs/dates --out exported/dates --int8   # ONNX, checked
    python -m minitransformer workspace my-course            # your own copy of the lessons and exercises
    python -m minitransformer download                      # Multi30k and Tiny Shakespeare, once
    python -m minitransformer grade submissions/             # the instructor's grader (pip install -e grader)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from .training.options import CPU_RECIPES, DATASETS, RECIPES, TrainOptions, check_device_name, field_type

_UNSET = object()
_GROUPS = {"data": "data", "model": "model (a preset, then any size given here)", "training": "training",
           "output": "output"}


def _recipe_default(name: str, otherwise: str | None) -> str:
    """" (default by dataset: ...)" from the recipes, or "" where no recipe sets ``name``."""
    values = []
    for d in DATASETS:
        gpu, cpu = RECIPES[d].get(name), CPU_RECIPES.get(d, RECIPES[d]).get(name)
        if gpu is not None and gpu == cpu:
            values.append(f"{d}: {gpu}")
        elif gpu is not None or cpu is not None:
            parts = [f"{v} on {where}" for v, where in ((gpu, "a CUDA GPU"), (cpu, "a CPU")) if v is not None]
            values.append(f"{d}: {', '.join(parts)}")
    if not values:
        return ""
    if otherwise and len(values) < len(DATASETS):
        values.append(f"otherwise {otherwise}")
    return f" (default by dataset: {', '.join(values)})"


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    """Add a ``train`` flag for each field of :class:`TrainOptions`, with the help in its metadata."""
    groups = {key: p.add_argument_group(title) for key, title in _GROUPS.items()}
    for f in fields(TrainOptions):
        flag = dict(f.metadata)
        group, doc, otherwise = groups[flag.pop("group")], flag.pop("doc"), flag.pop("otherwise", None)
        kind = field_type(f)
        if kind is bool:
            flag["action"] = "store_true" if f.default is False else argparse.BooleanOptionalAction
        elif kind is not str:
            flag["type"] = kind
        if f.default is None:
            doc += _recipe_default(f.name, otherwise)
        elif kind is not bool:
            doc += f" (default: {f.default})"
        group.add_argument("--" + f.name.replace("_", "-"), default=f.default, help=doc, **flag)


class _Renamed(io.TextIOBase):
    """A text stream that writes through to another, with the grader's program name replaced."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        # "python -m minitransformer_grader grade X" (the grader's own name for it) is "python -m minitransformer grade X".
        for name in ("python -m minitransformer_grader grade", "python -m minitransformer_grader"):
            text = text.replace(name, "python -m minitransformer grade")
        self.stream.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m minitransformer``, with its three subcommands."""
    parser = argparse.ArgumentParser(prog="minitransformer", description="Train and use the Transformer of "
                                     "'Attention Is All You Need'.")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{train,translate,attention,average,export,workspace,download,grade}")
    train = commands.add_parser("train", help="train a model (default: a small one on dates; docs/training.md, "
                                "'How long training takes', gives its measured time)",
                                description="Train a Transformer. With no options: a small model on English -> "
                                "German dates, on this machine (its measured time is in docs/training.md, 'How long "
                                "training takes'). Under torchrun: one process per GPU (or CPU process with gloo), "
                                "DistributedDataParallel.")
    add_train_arguments(train)
    translate = commands.add_parser("translate", help="translate sentences with a trained checkpoint",
                                    description="Translate with greedy decoding or beam search (--beam 4); "
                                    "reads lines from standard input (UTF-8) when no text is given. An empty "
                                    "sentence argument is refused; an empty line of standard input is skipped with "
                                    "a note (and an empty output line). A translation that reaches its length limit "
                                    "without an end token is called unreliable on standard error, a loop at its end "
                                    "cut. Input unlike the training data (unknown characters, more tokens than the longest "
                                    "training sentence; for a Multi30k model, a sentence that looks like the other "
                                    "language; for a dates model, not a full date of its source locale, a weekday "
                                    "that is not the date's, or a year outside 1900-2099) is translated with a "
                                    "warning on standard error. Errors and warnings number the sentences from 1; "
                                    "read from standard input or --input, a sentence's number is its line's.")
    translate.add_argument("text", nargs="*", help="sentences to translate (default: lines of --input, else of "
                                                   "standard input)")
    translate.add_argument("--input", help="a file of sentences, one per line (UTF-8, plain or .gz); output lines "
                                           "match its lines")
    translate.add_argument("--checkpoint", required=True,
                           help="checkpoint file, or a run folder (its best.pt, else its newest checkpoint)")
    translate.add_argument("--device", default="auto", help="auto, cpu, cuda, mps (default: auto)")
    translate.add_argument("--batch-size", type=int, default=64, help="sentences decoded together (default: 64)")
    translate.add_argument("--beam", type=int, default=1, help="beam size; 1 is greedy decoding, the paper used 4 "
                                                              "(default: 1)")
    translate.add_argument("--alpha", type=float, help="length penalty of beam search (default: the one the model's "
                                                       "training chose for its test, else the paper's 0.6)")
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
    average.add_argument("--last", type=int, help="average only the newest K of the given checkpoints (all of "
                                                  "them, with a note, when fewer are given)")
    average.add_argument("--out", required=True, help="file to write the averaged checkpoint to (never a "
                                                      "training checkpoint of a run)")
    average.add_argument("--force", action="store_true", help="replace --out if it exists (never a training "
                                                              "checkpoint)")
    export = commands.add_parser("export", help="write a trained translator as ONNX (encoder and one decoder step "
                                 "with its key/value cache), check it against the model, optionally int8",
                                 description="Export a checkpoint to ONNX for ONNX Runtime and the course "
                                 "website's translator (docs/shipping.md), then prove the files are the model: "
                                 "logits against the package's, greedy and beam-4 tokens on held-out sentences, "
                                 "and with --int8 the score, size and time that int8 changes. Needs the export "
                                 "extra: pip install -e \".[export]\".")
    export.add_argument("--checkpoint", required=True,
                        help="checkpoint file, or a run folder (its best.pt, else its newest checkpoint)")
    export.add_argument("--out", required=True, help="folder for the ONNX files, tokenizer.json, config.json and "
                                                     "report.json (created; an earlier export there is replaced)")
    export.add_argument("--int8", action="store_true", help="also write dynamically quantised int8 copies, and "
                                                            "measure what they change")
    export.add_argument("--sentences", type=int, default=100, help="held-out sentences whose tokens are compared, "
                                                                   "greedy and beam 4 (default: 100)")
    export.add_argument("--quality-sentences", type=int, help="test sentences scored float against int8 (default: "
                                                              "the whole test split)")
    export.add_argument("--report", help="also write the report (JSON) to this file, e.g. "
                                         "benchmarks/results/export-dates.json")
    workspace = commands.add_parser("workspace", help="copy the lessons and exercises into a folder of your own, "
                                    "to run and edit there", description="Copy the lessons (notebooks/) and the "
                                    "exercises (exercises/) of the course into OUT/notebooks and OUT/exercises, so "
                                    "that running a lesson never writes over the stored one. Each lesson's Practice "
                                    "link opens your copy of its exercise. A notebook you already have in OUT is "
                                    "kept as it is: run it again after updating the course to get new lessons.")
    workspace.add_argument("out", nargs="?", default="my-course", help="your folder (default: my-course)")
    workspace.add_argument("--course", default=".", help="the course repository's root (default: the current "
                                                         "folder)")
    download = commands.add_parser("download", help="download the data sets that need the network, once (Multi30k, "
                                   "Tiny Shakespeare)", description="Download and verify Multi30k (lessons 08b, 09b "
                                   "and 10, and train --dataset multi30k) and Tiny Shakespeare (lesson 09) into the "
                                   "user cache, so that the course then runs offline.")
    download.add_argument("--data-dir", help="put Multi30k in this existing folder instead of the cache")
    commands.add_parser("grade", help="grade exercise notebooks; EXECUTES the submitted code (see: minitransformer "
                        "grade --help); the instructor's grader, installed apart (pip install -e grader)",
                        description="Grade exercise notebooks; the options are those of python -m "
                        "minitransformer_grader.")
    return parser


def _given_train_arguments(argv: Sequence[str]) -> dict[str, Any]:
    """The ``train`` options written on the command line (not defaulted)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_train_arguments(parser)
    namespace = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions})
    parsed = parser.parse_args(list(argv), namespace=namespace)
    return {k: v for k, v in vars(parsed).items() if v is not _UNSET}


#: Options of a run that belong to one invocation, not to the run being resumed.
_NOT_RESUMED = {"overwrite": False}


def _train_options(args: argparse.Namespace, argv: Sequence[str]) -> tuple[Any, dict[str, Any] | None, Path | None]:
    """The run's options; when resuming, also the checkpoint resumed from and its path."""
    from .training import load_checkpoint
    from .training.checkpoint import REPLACED_RUN, check_same_run, checkpoint_to_resume, run_folder_of

    values = {k: v for k, v in vars(args).items() if k != "command"}
    if not args.resume:
        return TrainOptions.from_dict(values), None, None
    if args.overwrite:
        raise ValueError("--resume and --overwrite exclude each other: --resume continues the run in its folder, "
                         "--overwrite deletes it and starts afresh; give one of them")
    # Options not written again on the command line come from the run being resumed.
    given = _given_train_arguments(argv)
    place = args.resume
    if place == "auto":
        place = args.out or f"runs/{args.dataset}"
    path = checkpoint_to_resume(place)
    checkpoint = load_checkpoint(path)
    check_same_run(checkpoint, path)  # its options become the run's: first, is it this run's checkpoint?
    # The run goes on in the folder its checkpoint is in now (renamed or moved since, perhaps),
    # not in the one recorded in the checkpoint; a checkpoint that an interrupted --overwrite
    # set aside is put back by the run, so the run resumes from its folder.
    folder = run_folder_of(path)
    resume = str(folder) if path.parent.name == REPLACED_RUN else str(path)
    values = {**checkpoint.get("options", {}), "out": str(folder), **_NOT_RESUMED, **given, "resume": resume}
    return TrainOptions.from_dict(values), checkpoint, path


def _run_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .training import train
    from .training.stopping import finished_reason

    check_device_name(args.device, "--device")
    options, checkpoint, path = _train_options(args, argv)
    if checkpoint is not None:
        o = options.resolved()
        reason = finished_reason(o, checkpoint.get("step", 0), checkpoint.get("epoch", 0),
                                 checkpoint.get("batches_done", 0), checkpoint.get("metrics", {}),
                                 "exact_match" if o.dataset == "dates" else "bleu")
        if reason:
            print(f"nothing left to train: {path} stopped at step {checkpoint.get('step', 0):,} because {reason}. "
                  "Its test scores are in log.jsonl; to train on, give a larger "
                  f"{'--minutes' if o.minutes else '--epochs or --max-steps'} (or --target 0)")
            return 0
    result = train(options)
    if result.checkpoint is not None:
        print(f"checkpoint: {result.checkpoint}   log: {result.out / 'log.jsonl'}   curve: {result.out / 'loss.png'}"
              f"   ({result.seconds:.0f} s)")
    return 130 if result.interrupted else 0


def _read_standard_input(path: str | None = None) -> list[str]:
    """The lines of standard input (or of the file ``path``: plain or .gz), decoded as UTF-8 with a clear
    error when they are not."""
    where = "standard input" if path is None else f"--input {path}"
    if path is not None:
        import gzip

        if not Path(path).is_file():
            raise FileNotFoundError(f"--input {path} is not a file: expected a text file of sentences, one per "
                                    "line (UTF-8, plain or .gz)")
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as handle:
            data = handle.read()
    else:
        raw = getattr(sys.stdin, "buffer", None)
        if raw is None:  # already text (a StringIO in tests, a notebook)
            return [line.rstrip("\r\n") for line in sys.stdin]
        data = raw.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(f"{where} is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line} "
                         "cannot be decoded; expected UTF-8 text, one sentence per line") from None
    text = text.removeprefix("\ufeff")
    if text.endswith("\n"):
        text = text[:-1]
    return [line.rstrip("\r") for line in text.split("\n")] if text else []


def _check_sentences(sentences: list[str], from_stdin: bool, where: str = "standard input") -> list[int]:
    """The positions of the sentences to translate.

    An empty sentence given as an argument is refused; an empty line of standard input is
    skipped with a note (its output line stays empty, so output lines match input lines).
    """
    blank = [k for k, sentence in enumerate(sentences) if not sentence.strip()]
    if blank and not from_stdin:
        raise ValueError(f"sentence {blank[0] + 1} is empty: expected text to translate")
    if len(blank) == len(sentences):
        got = f"{len(blank)} empty line(s)" if blank else "none"
        raise ValueError(f"nothing to translate: expected sentences as arguments or lines on standard input, got {got}")
    if blank:
        shown = ", ".join(str(k + 1) for k in blank[:10]) + (" ..." if len(blank) > 10 else "")
        print(f"minitransformer translate: note: line(s) {shown} of {where} are empty: skipped, with an "
              "empty output line each so that output lines match input lines", file=sys.stderr)
    return [k for k in range(len(sentences)) if k not in set(blank)]


def _run_translate(args: argparse.Namespace) -> int:
    import math

    from .evaluation import check_source_length, training_length, translate_with_notes, unfamiliar_input
    from .training import load_model
    from .training.checkpoint import chosen_alpha
    from .utils import get_device

    check_device_name(args.device, "--device")
    if args.alpha is not None and (not math.isfinite(args.alpha) or args.alpha < 0):
        raise ValueError(f"--alpha (the length penalty of beam search) must be a finite number >= 0, got {args.alpha}")
    if args.extra_length < 0:
        raise ValueError(f"--extra-length (output tokens allowed beyond the source length) must be >= 0, "
                         f"got {args.extra_length}")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.beam < 1:
        raise ValueError(f"--beam must be at least 1 (1 is greedy decoding), got {args.beam}")
    if args.text and args.input:
        raise ValueError("give sentences as arguments or --input FILE, not both")
    lines = args.text or _read_standard_input(args.input)
    kept = _check_sentences(lines, from_stdin=not args.text,
                            where=f"--input {args.input}" if args.input else "standard input")
    sentences = [lines[k] for k in kept]
    numbers = [k + 1 for k in kept]  # errors and warnings count sentences (input lines) from 1
    device = get_device(None if args.device == "auto" else args.device)
    model, tokenizer, checkpoint = load_model(args.checkpoint, device)
    encoded = [tokenizer.encode(s) for s in sentences]
    for number, ids in zip(numbers, encoded):
        check_source_length(model, ids, f"sentence {number}")
    beam = _beam_size(args.beam, model, args.batch_size, max(map(len, encoded)), args.extra_length, device)
    alpha = args.alpha if args.alpha is not None else chosen_alpha(checkpoint.get("options"))
    warnings = unfamiliar_input(sentences, tokenizer, checkpoint.get("options", {}),
                                 training_length(checkpoint, args.checkpoint), numbers)
    translations, notes = translate_with_notes(model, tokenizer, sentences, device, args.batch_size,
                                               args.extra_length, beam_size=beam, alpha=alpha)
    warnings += [f"sentence {k} ({sentence[:40]!r}): {note}; its translation is unreliable"
                 for k, sentence, note in zip(numbers, sentences, notes) if note]
    for warning in warnings:
        print(f"minitransformer translate: warning: {warning}", file=sys.stderr)
    out = [""] * len(lines)
    for k, line in zip(kept, translations):
        out[k] = line
    for line in out:
        print(line, flush=True)
    return 0


def _beam_size(beam: int, model: Any, batch_size: int, longest: int, extra_length: int, device: Any) -> int:
    """--beam, capped at the vocabulary size (no more distinct hypotheses exist), and refused if it cannot fit."""
    from .decoding import beam_memory
    from .utils import check_memory

    vocab = model.config.tgt_vocab_size
    if beam > vocab:
        print(f"minitransformer translate: note: --beam {beam} is more than the {vocab} tokens of the vocabulary: "
              f"using --beam {vocab}", file=sys.stderr)
        beam = vocab
    if beam > 1:
        rows = min(batch_size, max(1, batch_size // beam)) * beam
        check_memory(beam_memory(model.config, rows, longest, longest + extra_length), f"--beam {beam}", device)
    return beam


def _run_attention(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    from .evaluation import training_length, unfamiliar_input
    from .inspection import save_attention_maps, sentence_attention
    from .training import load_model
    from .utils import get_device

    check_device_name(args.device, "--device")
    if not args.text.strip():
        raise ValueError("the source sentence is empty: expected text to draw the attention of")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise FileExistsError(f"--out {args.out} is a file: expected a folder for the PNG files (it is created "
                              "if it does not exist)")
    device = get_device(None if args.device == "auto" else args.device)
    model, tokenizer, checkpoint = load_model(args.checkpoint, device)
    for warning in unfamiliar_input([args.text], tokenizer, checkpoint.get("options", {}),
                                     training_length(checkpoint, args.checkpoint)):
        print(f"minitransformer attention: warning: {warning.replace('sentence 1 ', 'the sentence ', 1)}",
              file=sys.stderr)
    attention = sentence_attention(model, tokenizer, args.text, args.target, device)
    if attention.note:
        print(f"minitransformer attention: warning: the model's translation is unreliable: {attention.note}",
              file=sys.stderr)
    paths = save_attention_maps(attention, args.out, tuple(args.kinds))
    print(f"{args.text}  ->  {attention.translation}")
    print(f"wrote {len(paths)} figures to {args.out}: {', '.join(p.name for p in paths)}")
    return 0


def _run_average(args: argparse.Namespace) -> int:
    from .training import atomic_torch_save, average_checkpoints, list_checkpoints
    from .training.checkpoint import check_average_target
    from .utils import writable_folder

    if args.last is not None and args.last < 1:
        raise ValueError(f"--last must be at least 1, got {args.last}")
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
        if args.last > len(paths):
            # A short run keeps few checkpoints (the dates run: 2); averaging all of them is what was meant.
            print(f"note: --last {args.last}, but only {len(paths)} checkpoints were given: averaging all "
                  f"{len(paths)}", file=sys.stderr)
        paths = paths[-args.last :]
    out = atomic_torch_save(average_checkpoints(paths), target)
    print(f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {out}")
    return 0


def _run_workspace(args: argparse.Namespace) -> int:
    from .workspace import make_workspace

    copied, kept = make_workspace(args.course, args.out)
    out = Path(args.out)
    print(f"copied {len(copied)} notebooks into {out}/notebooks and {out}/exercises" +
          (f"; kept your {len(kept)} notebooks already there" if kept else ""))
    print(f"open it: jupyter lab --ServerApp.root_dir=. {out}/notebooks/00_introduction.ipynb")
    return 0


def _run_download(args: argparse.Namespace) -> int:
    from .data.multi30k import fetch_multi30k
    from .data.shakespeare import load_tiny_shakespeare

    print(f"Multi30k: verified in {fetch_multi30k(data_dir=args.data_dir)}")
    corpus = load_tiny_shakespeare(fallback=False)
    print(f"Tiny Shakespeare: {len(corpus.text):,} characters from {corpus.source}")
    return 0


def _run_grade(argv: list[str]) -> int:
    """``grade``: the instructor's grader, its own distribution, found through its entry point.

    The grader (``grader/`` in the repository, the ``minitransformer-grader`` distribution) declares
    ``grade`` in the entry-point group ``minitransformer.commands``; the library never imports it by
    name. It has its own parser (``python -m minitransformer_grader``); its usage and errors name the
    command that was typed here.
    """
    from importlib.metadata import entry_points

    found = entry_points(group="minitransformer.commands", name="grade")
    if not found:
        print("minitransformer grade: the instructor's grader is not installed; in the course's repository: "
              "pip install -e grader", file=sys.stderr)
        return 2
    grade = next(iter(found)).load()
    with contextlib.redirect_stdout(_Renamed(sys.stdout)), contextlib.redirect_stderr(_Renamed(sys.stderr)):
        return grade(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (130 after Ctrl-C, 2 after an error).

    Ctrl-C ends a command with one line on stderr and status 130, never a traceback (a training run
    first saves a checkpoint); ``grade`` handles its own. Before this runs, during ``import minitransformer``
    (which loads torch), Ctrl-C is Python's ``KeyboardInterrupt``, as for any library: the package
    installs no signal handler when it is imported.
    """
    from .training import CheckpointError, DivergedError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["grade"]:
        return _run_grade(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("minitransformer: interrupted (Ctrl-C) while starting", file=sys.stderr)
        return 130
    try:
        if args.command == "train":
            return _run_train(args, argv[1:])
        if args.command == "translate":
            return _run_translate(args)
        if args.command == "attention":
            return _run_attention(args)
        if args.command == "workspace":
            return _run_workspace(args)
        if args.command == "download":
            return _run_download(args)
        if args.command == "export":
            from .export import run_command

            return run_command(args)
        return _run_average(args)
    except (CheckpointError, DivergedError, MemoryError, OSError, TypeError, ValueError) as error:
        print(f"minitransformer {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # A stop inside the training loop has said what was saved; anywhere else (set-up, loading,
        # translating) nothing else would tell the user why the command ended.
        print(f"minitransformer {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
