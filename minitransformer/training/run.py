"""``train(options)``: build everything a run needs, train, test, report (lesson 07).

    from minitransformer.training import TrainOptions, train
    result = train(TrainOptions(dataset="dates", epochs=3, overwrite=True))
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from ..data import SharedTokenizer, padding_fraction, tokenization_report
from ..evaluation import METRICS
from ..model import Transformer
from ..utils import set_seed
from .checkpoint import (check_compatible, check_resumable, check_same_run, checkpoint_tokenizer, load_checkpoint,
                         restore_rng_state)
from .checkpoint_files import BEST, latest_checkpoint, list_checkpoints, run_folder_of
from .corpus import Corpus, drop_long, encode_pairs, load_corpus
from .distributed import (DistInfo, StopRequest, all_gather_objects, broadcast_object, cleanup_distributed,
                          init_distributed)
from .cpu import duration
from .options import CPU_RECIPES, TrainOptions
from .runfolder import (EarlierRun, check_out_folder, first_missing_folder, remove_empty_folders, remove_partial_files,
                        restore_best, set_aside_later, what_was_saved)
from .runlock import RunLock
from .runlog import RunLog, loss_curves, read_log, trim_log
from .schedule import transformer_scheduler
from .step import paper_adam
from .trainer import RUNNING_ZERO, Trainer



@dataclass
class TrainResult:
    """What a run left behind."""

    out: Path
    checkpoint: Path | None
    step: int
    interrupted: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _precision(options: TrainOptions, device: torch.device) -> bool:
    """True for bf16 autocast; checks that the device can do it."""
    if options.precision == "auto":
        return device.type == "cuda" and torch.cuda.is_bf16_supported()
    if options.precision == "fp32":
        return False
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"precision 'bf16' was asked for, but the GPU {torch.cuda.get_device_name(device)} "
                         "does not support bfloat16; use --precision fp32")
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"precision 'bf16' is supported on cuda and cpu devices, got {device.type}")
    return True


def _say(info: DistInfo, text: str) -> None:
    if info.is_main:
        print(text, flush=True)


def train(options: TrainOptions) -> TrainResult:
    """Train a Transformer as ``options`` say; resume, test and report."""
    started = time.perf_counter()
    o = options.resolved()
    info, device = init_distributed(o.device)
    lock = RunLock(o.out or ".")
    earlier = EarlierRun(Path(o.out or "."))
    created = first_missing_folder(Path(o.out or "."))  # folders this run makes: removed again if it fails empty
    threads = torch.get_num_threads()  # the run picks its own (Trainer); the caller's comes back after
    failed = True
    try:
        _lock(lock, info)
        result = _train(o, info, device, started, earlier)
        failed = False
        return result
    except BaseException:
        if earlier.replacing and earlier.folder.is_dir():
            n = earlier.restore()
            _say(info, f"--overwrite: the new run stopped before its first checkpoint; the earlier run's {n} files "
                       f"are back in {earlier.out}")
        raise
    finally:
        lock.release()
        if failed and created is not None and info.is_main:
            remove_empty_folders(Path(o.out or "."), created)
        torch.set_num_threads(threads)
        cleanup_distributed()


def _lock(lock: RunLock, info: DistInfo) -> None:
    """Process 0 locks the run folder (one writer per folder); every process stops if it cannot."""
    error = None
    if info.is_main:
        try:
            note = lock.acquire()
        except OSError as caught:  # RunFolderLocked, OutputError
            error = caught
        else:
            if note:
                _say(info, f"note: {note}")
    failed = broadcast_object(None if error is None else str(error), info)
    if error is not None:
        raise error
    if failed is not None:
        raise RuntimeError(f"process 0 could not lock the run folder: {failed}")


def _train(o: TrainOptions, info: DistInfo, device: torch.device, started: float,
           earlier: EarlierRun) -> TrainResult:
    out = Path(o.out or ".")
    if info.is_main:
        for note in (earlier.recover(), remove_partial_files(out)):
            if note:
                _say(info, f"note: {note}")
    resumed = latest_checkpoint(out if o.resume == "auto" else o.resume) if o.resume else None
    checkpoint = load_checkpoint(resumed) if resumed else None
    if checkpoint is not None:
        check_resumable(checkpoint, resumed or "")
        check_same_run(checkpoint, resumed or "")
    note = check_out_folder(o, out, resumed)
    if note:
        _say(info, f"note: {note}")
    set_seed(o.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 matmuls on tensor cores
    corpus = load_corpus(o)
    if checkpoint is not None:
        tokenizer = checkpoint_tokenizer(checkpoint, resumed or "")
    else:
        text = SharedTokenizer.cached(corpus.train, o.vocab_size or 8000).to_str() if info.is_main else None
        tokenizer = SharedTokenizer.from_str(broadcast_object(text, info))
    config = o.model_config(tokenizer.vocab_size, tokenizer.pad_id)
    if checkpoint is not None:
        check_compatible(checkpoint, config, o.resume or "")
    report = tokenization_report(tokenizer, [s for pair in corpus.train for s in pair])
    longest = min(config.max_len, o.batch_tokens or 4096)
    train_ids, dropped = drop_long(encode_pairs(tokenizer, corpus.train), longest)
    valid_ids, _ = drop_long(encode_pairs(tokenizer, corpus.validation), config.max_len)

    model = Transformer(config).to(device)
    optimizer = paper_adam(model.parameters(), device)
    scheduler = transformer_scheduler(optimizer, config.d_model, o.warmup or 4000, o.lr_factor or 1.0,
                                      o.lr_schedule)
    bf16 = _precision(o, device)
    log = RunLog(out / "log.jsonl", enabled=info.is_main, fresh=checkpoint is None)  # writes at its first record
    module: torch.nn.Module = model
    if info.enabled:
        module = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    trainer = Trainer(model, module, tokenizer, optimizer, scheduler, train_ids, valid_ids, corpus.validation,
                      corpus.metric, o, device, info, log, bf16)
    if checkpoint is not None:
        _restore(trainer, checkpoint, info, o.seed)
    elif info.enabled:
        torch.manual_seed(o.seed + info.rank)  # other dropout masks on each process
    # Everything is checked and loaded: only now may files of the folder move (aside, never deleted).
    earlier.replacing = info.is_main and o.overwrite and not o.resume and earlier.set_aside() > 0
    if checkpoint is not None and resumed is not None and info.is_main:
        here = run_folder_of(resumed).resolve() == out.resolve()
        notes = [set_aside_later(out, checkpoint["step"])] if here else []
        for note in [*notes, *trim_log(out / "log.jsonl", checkpoint["step"] if here else None)]:
            if note:
                _say(info, f"note: {note}")
        if note := restore_best(out, resumed, checkpoint):
            _say(info, f"note: {note}")
    trainer.on_save = earlier.discard if earlier.replacing else None
    if o.compile:
        # dynamic: batches change shape every step; compiled for one shape first, the model would be compiled
        # again at the second (38 s against 51 s to step 10 of the tiny model on a 2-core CPU)
        trainer.module = torch.compile(module, dynamic=True)
    if info.is_main:
        tokenizer.save(out / "tokenizer.json")
    pad = padding_fraction(trainer.sampler.all_batches(), trainer.sampler.src_lengths, trainer.sampler.tgt_lengths)
    setup = dict(options=o.to_dict(), n_train=len(train_ids), n_dropped=dropped, n_validation=len(corpus.validation),
                 n_test=len(corpus.test or []), vocab_size=tokenizer.vocab_size, mean_tokens=report.mean_tokens,
                 max_tokens=report.max_tokens, unk_fraction=report.unk_fraction, parameters=model.num_parameters(),
                 config=config.to_dict(), device=str(device), bf16=bf16, world_size=info.world_size,
                 batches_per_epoch=len(trainer.sampler) * info.world_size, padding_fraction=pad,
                 resumed_from_step=trainer.step, threads=trainer.threads, threads_reason=trainer.threads_reason,
                 recipe="laptop" if o.dataset in CPU_RECIPES and device.type != "cuda" else "default",
                 cpu_estimate_seconds=trainer.cpu_estimate.run_seconds if trainer.cpu_estimate else None)
    log.write("setup", **setup)
    trainer.metrics.setdefault("train_max_tokens", report.max_tokens)  # translate warns about longer input
    _print_setup(info, o, setup, dropped)
    if checkpoint is None:
        val_loss, val_nll = trainer.validation_loss()
        log.write("validation", step=0, val_loss=val_loss, val_nll=val_nll)
        _say(info, f"validation loss before training: {val_loss:.3f}")
    with StopRequest(escalate=not info.enabled) as stop:
        try:
            interrupted = trainer.run(stop)
        except KeyboardInterrupt:
            # Only when no signal handler could be set (not the main thread) or on a second Ctrl-C.
            if not stop.requested and not info.enabled:
                trainer.save()
            _say(info, what_was_saved(out, trainer.step))
            raise
    metrics = dict(trainer.metrics)
    if interrupted:
        _say(info, f"interrupted by {stop.signal_name} at step {trainer.step}: checkpoint written in {out}; "
             "continue with --resume")
    else:
        _finish(trainer, corpus, metrics, log)
    if info.enabled:
        # DDP keeps the replicas identical; say so with evidence (the tests check it).
        metrics["replica_checksums"] = all_gather_objects(weights_checksum(model), info)
    if info.is_main:
        save_loss_plot(out / "log.jsonl", out / "loss.png")
    last = list_checkpoints(out)[-1] if info.is_main else None
    seconds = time.perf_counter() - started
    log.write("done", step=trainer.step, interrupted=interrupted, seconds=seconds, **metrics)
    return TrainResult(out, last, trainer.step, interrupted, metrics, seconds)


def _restore(trainer: Trainer, checkpoint: dict[str, Any], info: DistInfo, seed: int) -> None:
    trainer.model.load_state_dict(checkpoint["model"])
    fast = {k: trainer.optimizer.param_groups[0][k] for k in ("fused", "foreach")}
    trainer.optimizer.load_state_dict(checkpoint["optimizer"])
    for group in trainer.optimizer.param_groups:
        group.update(fast)  # the kernel choice belongs to this machine, not the one that wrote it
    trainer.scheduler.load_state_dict(checkpoint["scheduler"])
    trainer.step, trainer.epoch = checkpoint["step"], checkpoint["epoch"]
    trainer.batches_done = checkpoint.get("batches_done", 0)
    trainer.metrics = dict(checkpoint.get("metrics", {}))
    sums = checkpoint.get("running", [])
    if len(sums) == info.world_size:  # else the epoch's average starts again (as does bit-for-bit equality)
        trainer.running = {**RUNNING_ZERO, **sums[info.rank]}
    trainer.saved_step = trainer.step
    states = checkpoint.get("rng", [])
    if len(states) == info.world_size:
        restore_rng_state(states[info.rank])
    else:
        # Another number of processes: the run goes on, but not bit for bit.
        set_seed(seed + trainer.step + info.rank)
        random.seed(seed + trainer.step + info.rank)


def _print_setup(info: DistInfo, o: TrainOptions, s: dict[str, Any], dropped: int) -> None:
    c = s["config"]
    what = {"dates": f"dates {o.src_locale} -> {o.tgt_locale}", "multi30k": f"Multi30k {o.src_lang} -> {o.tgt_lang}",
            "text": f"{o.src_file} -> {o.tgt_file}"}[o.dataset]
    extra = f" ({dropped:,} longer pairs left out)" if dropped else ""
    _say(info, f"data: {what}: {s['n_train']:,} training{extra}, {s['n_validation']:,} validation, "
               f"{s['n_test']:,} test pairs")
    _say(info, f"BPE vocabulary: {s['vocab_size']:,} tokens; {s['mean_tokens']:.1f} tokens per sentence on average "
               f"(longest {s['max_tokens']})")
    _say(info, f"model: {c['n_encoder_layers']}+{c['n_decoder_layers']} layers, d_model {c['d_model']}, "
               f"{c['n_heads']} heads, d_ff {c['d_ff']}, {s['parameters'] / 1e6:.2f}M parameters on {s['device']}"
               f"{' x' + str(s['world_size']) if s['world_size'] > 1 else ''} "
               f"({'bf16' if s['bf16'] else 'fp32'}{', compiled' if o.compile else ''}), "
               f"{s['threads']} CPU thread{'s' if s['threads'] > 1 else ''} ({s['threads_reason']})")
    if s["recipe"] == "laptop":
        sized = any(getattr(o, k) is not None for k in ("d_model", "n_heads", "d_ff", "layers"))
        preset = "" if o.preset != CPU_RECIPES[o.dataset]["preset"] or sized else f"the {o.preset} model, "
        when = (f"; about {duration(s['cpu_estimate_seconds'])} of training estimated from this CPU's speed now, "
                "validation not counted" if s["cpu_estimate_seconds"] is not None else "")
        _say(info, f"recipe: the laptop recipe of {o.dataset} (no CUDA GPU here): {preset}{_length(o)}, "
                   f"warm-up {o.warmup}, factor {o.lr_factor:g}{when}; --preset base for the paper's base model")
    _say(info, f"batches: {o.batch_tokens:,} tokens per side, {s['batches_per_epoch']:,} per epoch, "
               f"padding {100 * s['padding_fraction']:.1f}%"
               f"{'; resuming at step ' + str(s['resumed_from_step']) if s['resumed_from_step'] else ''}")


def _length(o: TrainOptions) -> str:
    """How long a resolved run trains, as its setup line says it: its first limit in the order train() reads them."""
    if o.minutes is not None:
        return f"{o.minutes:g} minutes"
    if o.epochs is not None:
        return f"{o.epochs} epoch{'s' if o.epochs != 1 else ''}"
    if o.max_steps is not None:
        return f"at most {o.max_steps:,} steps"
    if o.time_budget is not None:
        return f"at most {duration(o.time_budget)} (--time-budget)"
    return "no limit on its length"


def _finish(trainer: Trainer, corpus: Corpus, metrics: dict[str, Any], log: RunLog) -> None:
    """Score the test split, show a few translations."""
    info, o = trainer.info, trainer.options
    pairs = (corpus.test if corpus.test else corpus.validation)[: o.eval_sentences]
    split = "test" if corpus.test else "validation"
    key = "val_" + corpus.metric
    best_step = metrics.get("best_step")
    note = ""
    best_file = trainer.out / BEST
    if (best_step is not None and best_step != trainer.step and metrics["best_" + key] > metrics.get(key, -1)
            and best_file.is_file()):  # a run resumed into a new folder has no best.pt of its own
        # Validation went down since its best epoch: test (and translate with) the best weights.
        trainer.model.load_state_dict(load_checkpoint(best_file, map_location=trainer.device)["model"])
        note = f" (the weights of step {best_step}, best on validation)"
    start = time.perf_counter()
    hypotheses = trainer.translate([s for s, _ in pairs])
    score = METRICS[corpus.metric](hypotheses, [t for _, t in pairs])
    seconds = time.perf_counter() - start
    metrics[f"{split}_{corpus.metric}"] = score
    log.write(split, step=trainer.step, n=len(pairs), **{corpus.metric: score}, seconds=seconds,
              examples=[[s, h, t] for (s, t), h in list(zip(pairs, hypotheses))[: o.show]])
    shown = f"{100 * score:.2f}% exact match" if corpus.metric == "exact_match" else f"BLEU {score:.2f}"
    _say(info, f"{split}, greedy: {shown} on {len(pairs):,} pairs after {trainer.step:,} steps{note} "
               f"({seconds:.1f} s{', after the training budget' if o.minutes is not None else ''})")
    for (src, ref), hyp in list(zip(pairs, hypotheses))[: o.show]:
        mark = "=" if hyp == ref else "x"
        _say(info, f"  {src}  ->  {hyp}  [{mark} {ref}]")
    if o.test_beam > 1:
        start = time.perf_counter()
        beamed = trainer.translate([s for s, _ in pairs], beam_size=o.test_beam, alpha=o.beam_alpha)
        beam_score = METRICS[corpus.metric](beamed, [t for _, t in pairs])
        seconds = time.perf_counter() - start
        metrics[f"{split}_{corpus.metric}_beam{o.test_beam}"] = beam_score
        log.write(f"{split}_beam", step=trainer.step, n=len(pairs), beam=o.test_beam, alpha=o.beam_alpha,
                  **{corpus.metric: beam_score},
                  seconds=seconds)
        shown = (f"{100 * beam_score:.2f}% exact match" if corpus.metric == "exact_match"
                 else f"BLEU {beam_score:.2f}")
        _say(info, f"{split}, beam {o.test_beam} (length penalty {o.beam_alpha:g}): {shown} ({seconds:.1f} s)")


def save_loss_plot(log_path: str | Path, png_path: str | Path, title: str | None = None) -> Path:
    """Draw the training and validation losses of a run's log into a PNG file (titled by its folder's name)."""
    from matplotlib.figure import Figure

    from ..plotting import plot_loss_curve

    curves = loss_curves(read_log(log_path))
    figure = Figure(figsize=(7, 4), layout="constrained")
    plot_loss_curve(curves["steps"], curves["train_loss"], curves["val_steps"], curves["val_loss"],
                    ax=figure.subplots(), title=title or f"loss of {Path(log_path).parent.name}")
    figure.savefig(png_path, dpi=120)
    return Path(png_path)


def weights_checksum(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes: equal checksums mean bit-identical weights."""
    digest = hashlib.sha256()
    for name, p in model.state_dict().items():
        digest.update(name.encode())
        digest.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
