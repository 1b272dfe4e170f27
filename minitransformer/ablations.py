"""Ablations of the paper's recipe: one choice changed at a time, trained and scored (lesson 10).

The paper's Table 3 varies one thing at a time around the base model (rows A to E: heads,
d_k, size, dropout and label smoothing, learned positions). :data:`VARIANTS` does the same
around a small baseline, and adds the recipe's choices that Table 3 leaves out (warm-up for
post-LN and pre-LN, the sqrt(d_k) scaling, weight sharing, gradient clipping). Every variant
is one setting away from the baseline, and every setting is an option of the package
(a :class:`~minitransformer.config.TransformerConfig` field or a training option).

:func:`run_ablation` trains one (variant, seed) for a fixed number of steps and returns
its curves and final figures as plain data; ``benchmarks/ablations.py`` runs the whole
suite and writes ``benchmarks/results/ablations-cpu.json``; lesson 10 re-runs one job
with this same function and checks it against the stored result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from .config import TransformerConfig
from .data import SharedTokenizer, TokenBatchSampler, collate_pairs, load_multi30k
from .evaluation import bleu, translate_sentences
from .model import Transformer
from .training.loss import label_smoothed_nll
from .training.schedule import transformer_scheduler
from .utils import set_seed


@dataclass(frozen=True)
class AblationSize:
    """The baseline of an ablation suite: model size, data and step budget.

    The defaults are the CPU suite's (the task and size chosen by pilot runs; see
    ``benchmarks/ablations.py`` and lesson 10). The model-side fields are the paper's recipe
    except the sizes; the learning rate follows the paper's formula
    ``lr_factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` with a short warm-up.

    Args:
        d_model, n_heads, d_ff, layers: the baseline model (``layers`` per stack).
        dropout: P_drop of the baseline (paper: 0.1).
        label_smoothing: eps_ls of the baseline (paper: 0.1).
        clip_norm: gradient-norm clipping of the baseline (0: off).
        vocab_size: shared BPE vocabulary trained on the training split.
        train_size: use only the first N training pairs (None: all 29,000).
        batch_tokens: token budget of each side of a batch.
        steps: optimizer steps of every job.
        warmup: warm-up steps of the schedule.
        lr_factor: factor of the schedule.
        eval_every: steps between validation-perplexity points of the curve.
        log_every: steps between training-loss points of the curve.
        valid_sentences: validation pairs scored for perplexity (None: all 1,014).
        bleu_sentences: the first N validation pairs translated (greedy) for BLEU.
    """

    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    layers: int = 2
    dropout: float = 0.1
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    vocab_size: int = 4000
    train_size: int | None = None
    batch_tokens: int = 1200
    steps: int = 900
    warmup: int = 100
    lr_factor: float = 0.5
    eval_every: int = 150
    log_every: int = 10
    valid_sentences: int | None = None
    bleu_sentences: int = 200

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "d_ff", "layers", "vocab_size", "batch_tokens", "steps", "warmup",
                     "eval_every", "log_every", "bleu_sentences"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AblationSize.{name} must be a positive int, got {value!r}")
        if self.d_model % (4 * self.n_heads):
            raise ValueError(f"d_model must be divisible by 4 * n_heads (the 4x-heads variant of row A), "
                             f"got d_model={self.d_model}, n_heads={self.n_heads}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Named sizes: "cpu" is the committed suite, "quick" the 5-minute check, "tiny" the test's,
#: "base" the paper's base model for a GPU (fewer steps than the paper's 100,000).
SIZES: dict[str, AblationSize] = {
    "cpu": AblationSize(),
    "quick": AblationSize(d_model=64, n_heads=2, d_ff=256, steps=150, warmup=40, eval_every=50,
                          batch_tokens=1200, train_size=8000, valid_sentences=300, bleu_sentences=100,
                          vocab_size=2000, lr_factor=0.5),
    "tiny": AblationSize(d_model=32, n_heads=2, d_ff=64, layers=1, steps=12, warmup=4, eval_every=6,
                         log_every=3, batch_tokens=400, train_size=600, valid_sentences=40, bleu_sentences=12,
                         vocab_size=300, lr_factor=1.0),
    "base": AblationSize(d_model=512, n_heads=8, d_ff=2048, layers=6, steps=3000, warmup=800, eval_every=250,
                         log_every=25, batch_tokens=8000, vocab_size=8000, lr_factor=1.0, bleu_sentences=1014),
}


@dataclass(frozen=True)
class Variant:
    """One ablation: a name, what it changes, and the paper's figures for it.

    Args:
        name: short identifier (a key of :data:`VARIANTS`).
        group: the Table 3 row ("A" ... "E") or "recipe" for choices Table 3 leaves out.
        label: what it changes, in words.
        change: the setting(s) it changes, computed from the baseline size: model fields
            (:class:`TransformerConfig`) and training fields (``label_smoothing``,
            ``clip_norm``, ``lr_schedule``), e.g. ``{"n_heads": 1}``.
        paper: the paper's Table 3 (dev set, newstest2013) figures of the closest row,
            ``{"ppl": ..., "bleu": ..., "row": ...}``, or None where Table 3 has none.
        compare_to: the variant it is measured against (usually the baseline).
    """

    name: str
    group: str
    label: str
    change: Callable[[AblationSize], dict[str, Any]]
    paper: dict[str, Any] | None = None
    compare_to: str = "baseline"

    def settings(self, size: AblationSize) -> dict[str, Any]:
        """The changed settings at this size."""
        return dict(self.change(size))


#: The paper's base model on the development set (Table 3): perplexity per word piece, BLEU.
PAPER_BASE = {"ppl": 4.92, "bleu": 25.8, "row": "base"}
TRAINING_FIELDS = ("label_smoothing", "clip_norm", "lr_schedule")
MODEL_FIELDS = ("d_model", "n_heads", "d_ff", "dropout", "norm_first", "tie_embeddings", "positional",
                "scale_attention", "d_qk", "embedding_init", "n_encoder_layers", "n_decoder_layers")

_VARIANT_LIST = [
    Variant("baseline", "base", "the recipe (post-LN, warm-up, sinusoids, eps_ls 0.1, dropout 0.1, tied)",
            lambda s: {}, PAPER_BASE),
    Variant("heads_1", "A", "one head (d_k = d_model)", lambda s: {"n_heads": 1},
            {"ppl": 5.29, "bleu": 24.9, "row": "A: h=1, d_k=512"}),
    Variant("heads_x4", "A", "4x the heads (d_k / 4)", lambda s: {"n_heads": 4 * s.n_heads},
            {"ppl": 4.91, "bleu": 25.8, "row": "A: h=16, d_k=32"}),
    Variant("dk_quarter", "B", "queries and keys of d_k / 4 (same heads, d_v unchanged)",
            lambda s: {"d_qk": s.d_model // s.n_heads // 4}, {"ppl": 5.16, "bleu": 25.1, "row": "B: d_k=16"}),
    Variant("smaller", "C", "half the width (d_model and d_ff / 2)",
            lambda s: {"d_model": s.d_model // 2, "d_ff": s.d_ff // 2},
            {"ppl": 5.75, "bleu": 24.5, "row": "C: d_model=256, d_k=32"}),
    Variant("larger", "C", "twice the width (d_model and d_ff x 2)",
            lambda s: {"d_model": s.d_model * 2, "d_ff": s.d_ff * 2},
            {"ppl": 4.66, "bleu": 26.0, "row": "C: d_model=1024, d_k=128"}),
    Variant("dropout_0", "D", "no dropout", lambda s: {"dropout": 0.0},
            {"ppl": 5.77, "bleu": 24.6, "row": "D: P_drop=0.0"}),
    Variant("smoothing_0", "D", "no label smoothing", lambda s: {"label_smoothing": 0.0},
            {"ppl": 4.67, "bleu": 25.3, "row": "D: eps_ls=0.0"}),
    Variant("learned_pos", "E", "learned positional embeddings", lambda s: {"positional": "learned"},
            {"ppl": 4.92, "bleu": 25.7, "row": "E: positional embedding"}),
    Variant("no_pos", "E", "no position information", lambda s: {"positional": "none"}),
    Variant("no_warmup", "recipe", "no warm-up: constant lr at the schedule's peak (post-LN)",
            lambda s: {"lr_schedule": "constant"}),
    Variant("pre_ln", "recipe", "pre-LN (norm_first=True)", lambda s: {"norm_first": True}),
    Variant("pre_ln_no_warmup", "recipe", "pre-LN without warm-up",
            lambda s: {"norm_first": True, "lr_schedule": "constant"}, compare_to="pre_ln"),
    Variant("no_scale", "recipe", "no division by sqrt(d_k)", lambda s: {"scale_attention": False}),
    Variant("untied", "recipe", "separate embeddings and output projection", lambda s: {"tie_embeddings": False}),
    Variant("no_clip", "recipe", "no gradient clipping", lambda s: {"clip_norm": 0.0}),
    # Not a choice of the paper but a test of lesson 10's explanation of row E: if learned (or no)
    # positions win here because Xavier-initialised token vectors start small next to the sinusoid,
    # token tables that start at the sinusoid's size should close most of that gap.
    Variant("embed_normal", "recipe", "token embeddings drawn from N(0, 1/d_model) instead of Xavier",
            lambda s: {"embedding_init": "normal"}),
    # Row E again, with token tables that start at the sinusoid's size: learned positions against
    # sinusoids (embed_normal), the comparison the paper made ("nearly identical").
    Variant("embed_normal_learned", "recipe", "learned positions, token embeddings from N(0, 1/d_model)",
            lambda s: {"embedding_init": "normal", "positional": "learned"}, compare_to="embed_normal"),
]
#: Every variant by name, in the order of the paper's table then the recipe.
VARIANTS: dict[str, Variant] = {v.name: v for v in _VARIANT_LIST}
#: The reduced set of ``--quick``.
QUICK_VARIANTS = ("baseline", "no_pos", "no_warmup", "smoothing_0")


def variant(name: str) -> Variant:
    """The :class:`Variant` called ``name``, or a ValueError listing the known ones."""
    if name not in VARIANTS:
        raise ValueError(f"unknown ablation variant {name!r}; known: {', '.join(VARIANTS)}")
    return VARIANTS[name]


@dataclass
class AblationData:
    """The tokenized task shared by every job of a suite.

    Attributes:
        tokenizer: the shared BPE tokenizer.
        train_ids: encoded training pairs.
        valid_ids: encoded validation pairs scored for perplexity.
        bleu_pairs: validation sentence pairs translated for BLEU.
    """

    tokenizer: SharedTokenizer
    train_ids: list[tuple[list[int], list[int]]]
    valid_ids: list[tuple[list[int], list[int]]]
    bleu_pairs: list[tuple[str, str]]


def find_multi30k(start: str | Path | None = None) -> Path | None:
    """A local Multi30k folder: ``$MINITRANSFORMER_MULTI30K_DIR``, else ``shared/data/multi30k`` beside
    ``start`` (default: the working directory) or beside any folder above it; None if there is none.

    None lets :func:`load_ablation_data` use the package's cache (and download what is missing).
    """
    import os

    from .data.multi30k import ENV_VAR

    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "shared" / "data" / "multi30k"
        if (candidate / "train.de.gz").is_file():
            return candidate
    return None


def load_ablation_data(size: AblationSize, data_dir: str | Path | None = None, src_lang: str = "de",
                       tgt_lang: str = "en", cache_dir: str | Path | None = None) -> AblationData:
    """Multi30k (de -> en by default), its BPE tokenizer, and the fixed validation subsets.

    Args:
        size: the suite's size (vocabulary, training and validation subsets).
        data_dir: a folder holding Multi30k's ``.gz`` files (else the package's default).
        src_lang, tgt_lang: the direction.
        cache_dir: the tokenizer cache folder (default: the user cache).

    Returns:
        An :class:`AblationData`.
    """
    train = [(s, t) for s, t in load_multi30k("train", data_dir, src_lang, tgt_lang) if s and t]
    train = train[: size.train_size] if size.train_size else train
    valid = load_multi30k("validation", data_dir, src_lang, tgt_lang)
    tokenizer = SharedTokenizer.cached(train, size.vocab_size, cache_dir=cache_dir)

    def encode(pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        ids = zip(tokenizer.encode_batch([s for s, _ in pairs]), tokenizer.encode_batch([t for _, t in pairs]))
        return [(s, t) for s, t in ids if max(len(s), len(t)) <= min(size.batch_tokens, 256)]

    return AblationData(tokenizer, encode(train), encode(valid[: size.valid_sentences]),
                        valid[: size.bleu_sentences])


def job_settings(size: AblationSize, name: str) -> tuple[TransformerConfig, dict[str, Any]]:
    """The model config and training settings of variant ``name`` at ``size``.

    Returns:
        ``(config, training)`` with training keys ``label_smoothing``, ``clip_norm``, ``lr_schedule``.
        The config's vocabulary size is 1 here (a placeholder: :func:`run_ablation` sets it).
    """
    changes = variant(name).settings(size)
    unknown = sorted(set(changes) - set(TRAINING_FIELDS) - set(MODEL_FIELDS))
    if unknown:
        raise ValueError(f"variant {name!r} changes unknown settings {unknown}")
    training = {"label_smoothing": size.label_smoothing, "clip_norm": size.clip_norm, "lr_schedule": "inverse_sqrt"}
    training.update({k: v for k, v in changes.items() if k in TRAINING_FIELDS})
    # The committed suite was measured with Xavier-uniform token tables, the package's default
    # until it changed to "normal"; the baseline keeps that start so that the stored results and a
    # live re-run agree (the variants "embed_normal*" change it) until the suite is re-measured.
    model = dict(d_model=size.d_model, n_heads=size.n_heads, d_ff=size.d_ff, n_encoder_layers=size.layers,
                 n_decoder_layers=size.layers, dropout=size.dropout, tie_embeddings=True, max_len=256,
                 embedding_init="xavier")
    model.update({k: v for k, v in changes.items() if k in MODEL_FIELDS})
    return TransformerConfig(src_vocab_size=3, tgt_vocab_size=3, **model), training


@torch.no_grad()
def validation_perplexity(model: Transformer, data: AblationData, batch_tokens: int,
                          device: torch.device | str = "cpu") -> float:
    """exp(mean negative log-likelihood per target token) on ``data.valid_ids``, teacher-forced, in eval mode.

    This is the plain NLL (no label smoothing), so every variant is measured alike.
    """
    model.eval()
    tok = data.tokenizer
    longest = max(max(len(s), len(t)) for s, t in data.valid_ids)
    sampler = TokenBatchSampler([len(s) for s, _ in data.valid_ids], [len(t) for _, t in data.valid_ids],
                                max(batch_tokens, longest), shuffle=False)
    nll, tokens = 0.0, 0
    for indices in sampler:
        batch = collate_pairs([data.valid_ids[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id).to(device)
        _, nll_sum, n = label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.0, tok.pad_id)
        nll += float(nll_sum)
        tokens += int(n)
    model.train()
    mean = nll / tokens
    return math.exp(mean) if mean < 50 else math.inf


def run_ablation(name: str, seed: int, size: AblationSize, data: AblationData,
                 device: torch.device | str = "cpu", progress: Callable[[int, float], None] | None = None,
                 max_steps: int | None = None) -> dict[str, Any]:
    """Train variant ``name`` with ``seed`` for ``size.steps`` steps; score it.

    The seed fixes the initialisation, dropout and batch order, so the same (variant, seed,
    size, data) gives the same numbers on the same machine (up to the last digits when the
    number of threads differs).

    Args:
        name: a key of :data:`VARIANTS`.
        seed: the run's seed.
        size: the baseline and budget.
        data: from :func:`load_ablation_data`.
        device: where to train.
        progress: called as ``progress(step, train_nll)`` at every curve point.
        max_steps: stop earlier than ``size.steps`` (a partial re-run; final figures are then
            those of that step).

    Returns:
        A plain dict: variant, seed, settings, final ``ppl`` and ``bleu`` (``ppl`` None and
        ``diverged`` True if the loss became NaN or infinite), ``curve`` (step, train NLL
        per token, learning rate every ``log_every`` steps), ``valid_curve`` (step,
        perplexity every ``eval_every`` steps), parameters, steps, seconds.
    """
    started = time.perf_counter()
    device = torch.device(device)
    config, training = job_settings(size, name)
    tok = data.tokenizer
    config = config.replace(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, pad_id=tok.pad_id)
    set_seed(seed)
    model = Transformer(config).to(device)
    fast = {"fused": True} if device.type == "cuda" else {"foreach": True}
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, **fast)
    scheduler = transformer_scheduler(optimizer, config.d_model, size.warmup, size.lr_factor,
                                      training["lr_schedule"])
    sampler = TokenBatchSampler([len(s) for s, _ in data.train_ids], [len(t) for _, t in data.train_ids],
                                size.batch_tokens, shuffle=True, seed=seed)
    total = min(size.steps, max_steps or size.steps)
    curve: dict[str, list[float]] = {"step": [], "train_nll": [], "lr": []}
    valid_curve: dict[str, list[float | None]] = {"step": [], "ppl": []}
    step, epoch, diverged = 0, 0, False
    since_nll, since_tokens = torch.zeros(()), 0
    model.train()
    while step < total and not diverged:
        sampler.set_epoch(epoch)
        for indices in sampler:
            batch = collate_pairs([data.train_ids[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id)
            batch = batch.to(device)
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss_sum, nll_sum, n = label_smoothed_nll(logits, batch.tgt_out, training["label_smoothing"],
                                                      tok.pad_id)
            (loss_sum / batch.n_tgt_tokens).backward()
            if training["clip_norm"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), training["clip_norm"])
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            since_nll += nll_sum.detach().cpu()
            since_tokens += batch.n_tgt_tokens
            if step % size.log_every == 0 or step == total:
                mean = float(since_nll) / since_tokens
                curve["step"].append(step)
                curve["train_nll"].append(mean if math.isfinite(mean) else None)  # type: ignore[arg-type]
                curve["lr"].append(lr)
                since_nll, since_tokens = torch.zeros(()), 0
                if progress is not None:
                    progress(step, mean)
                if not math.isfinite(mean):
                    diverged = True
                    break
            if step % size.eval_every == 0 or step == total:
                ppl = validation_perplexity(model, data, size.batch_tokens, device)
                valid_curve["step"].append(step)
                valid_curve["ppl"].append(ppl if math.isfinite(ppl) else None)
            if step >= total:
                break
        epoch += 1
    final_ppl = valid_curve["ppl"][-1] if valid_curve["ppl"] and not diverged else None
    if final_ppl is None:
        diverged = True
        score = 0.0
    else:
        sources = [s for s, _ in data.bleu_pairs]
        hypotheses = translate_sentences(model, tok, sources, device=device, extra_length=20)
        score = bleu(hypotheses, [t for _, t in data.bleu_pairs])
    return {
        "variant": name, "seed": seed, "settings": variant(name).settings(size), "config": config.to_dict(),
        "training": training, "ppl": final_ppl, "bleu": score, "diverged": diverged,
        "curve": curve, "valid_curve": valid_curve, "parameters": model.num_parameters(),
        "steps": step, "epochs": step / max(1, len(sampler)), "seconds": time.perf_counter() - started,
    }


_worker: dict[str, Any] = {}


def init_worker(size: dict[str, Any], data_dir: str | None, device: str, threads: int = 1) -> None:
    """Set up a process of a suite's pool: its thread count and the task's data (loaded once per process).

    Args:
        size: an :class:`AblationSize` as a dict (``to_dict``).
        data_dir: the Multi30k folder, or None.
        device: where the jobs train.
        threads: PyTorch threads of this process.
    """
    torch.set_num_threads(threads)
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 matmuls on tensor cores
    _worker["size"] = AblationSize(**size)
    _worker["data"] = load_ablation_data(_worker["size"], data_dir)
    _worker["device"] = device


def run_worker_job(job: tuple[str, int]) -> dict[str, Any]:
    """Run ``(variant, seed)`` in a process set up by :func:`init_worker`."""
    name, seed = job
    return run_ablation(name, seed, _worker["size"], _worker["data"], _worker["device"])


def summarize(records: list[dict[str, Any]], names: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """Mean, sample standard deviation, minimum and maximum over seeds of each variant's figures.

    Args:
        records: results of :func:`run_ablation`.
        names: the variants to summarise, in order (default: those found, in :data:`VARIANTS` order).

    Returns:
        One dict per variant, with ``seeds``, ``ppl`` and ``bleu`` (each a dict of ``mean``, ``std``,
        ``min``, ``max`` and ``values``), ``diverged`` (a count), ``paper``, ``group``, ``label`` and
        ``compare_to``. A diverged run has no perplexity:
        it is left out of the perplexity statistics and counted in ``diverged``.
    """
    found = {r["variant"] for r in records}
    names = names or [n for n in VARIANTS if n in found]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        rows = sorted((r for r in records if r["variant"] == name), key=lambda r: r["seed"])
        v = variant(name)
        out[name] = {"group": v.group, "label": v.label, "compare_to": v.compare_to, "paper": v.paper,
                     "seeds": [r["seed"] for r in rows], "diverged": sum(bool(r["diverged"]) for r in rows),
                     "ppl": _stats([r["ppl"] for r in rows if r["ppl"] is not None]),
                     "bleu": _stats([r["bleu"] for r in rows])}
    return out


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None, "values": []}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(values), "max": max(values), "values": list(values)}


def with_size(size: AblationSize, **changes: Any) -> AblationSize:
    """A copy of ``size`` with some fields changed (validated again)."""
    return replace(size, **changes)


__all__ = ["AblationData", "AblationSize", "PAPER_BASE", "QUICK_VARIANTS", "SIZES", "VARIANTS", "Variant",
           "find_multi30k", "init_worker", "job_settings", "run_worker_job", "load_ablation_data", "run_ablation", "summarize", "validation_perplexity", "variant",
           "with_size"]
