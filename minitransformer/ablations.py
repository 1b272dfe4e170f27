"""Ablations of the paper's recipe: one choice changed at a time, trained and scored (lesson 10).

:data:`VARIANTS` follows Table 3's rows A to E around a small baseline, scaled in the paper's own ratios, and adds
the schedule and the course's departures. ``python -m benchmarks.ablations`` runs the suite; lesson 10 re-runs
one job with :func:`run_ablation` and checks it against the stored result.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from .config import TransformerConfig
from .data import SharedTokenizer, TokenBatchSampler, collate_pairs, load_multi30k
from .data.multi30k import ENV_VAR as MULTI30K_ENV_VAR
from .evaluation import bleu, translate_sentences
from .model import Transformer
from .training.loss import label_smoothed_nll
from .training.schedule import transformer_scheduler
from .training.step import diverged as loss_diverged, paper_adam, train_step
from .utils import set_seed


#: The paper's base model on the development set (Table 3): perplexity per word piece, BLEU, and
#: the sizes the rows of Table 3 are scaled from (h heads of d_k, d_model, d_ff, N layers).
PAPER_BASE = {"ppl": 4.92, "bleu": 25.8, "row": "base", "n_heads": 8, "d_k": 64, "d_model": 512, "d_ff": 2048,
              "layers": 6}


@dataclass(frozen=True)
class AblationSize:
    """The baseline of an ablation suite: model size, data and step budget.

    The defaults are the CPU suite's (the task and size chosen by pilot runs; see
    ``benchmarks/ablations.py`` and lesson 10). The model-side fields are the paper's recipe
    except the sizes; the learning rate follows the paper's formula
    ``lr_factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` with a short warm-up.
    """

    d_model: int = 128
    n_heads: int = 8
    d_ff: int = 512
    layers: int = 2
    dropout: float = 0.1
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    vocab_size: int = 4000
    train_size: int | None = None
    batch_tokens: int = 1200
    steps: int = 1000
    warmup: int = 400
    lr_factor: float = 0.5
    eval_every: int = 200
    log_every: int = 10
    valid_sentences: int | None = None
    bleu_sentences: int = 1014

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "d_ff", "layers", "vocab_size", "batch_tokens", "steps", "warmup",
                     "eval_every", "log_every", "bleu_sentences"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"AblationSize.{name} must be a positive int, got {value!r}")
        if self.n_heads % PAPER_BASE["n_heads"] or self.d_model % (4 * self.n_heads):
            raise ValueError(f"n_heads must be a multiple of the paper's {PAPER_BASE['n_heads']} (row A scales it "
                             f"by 1/8 .. 4) and d_model divisible by 4 * n_heads (row A's 32 heads and row B's "
                             f"d_k / 4), got d_model={self.d_model}, n_heads={self.n_heads}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Named sizes: "cpu" is the committed suite, "quick" the 5-minute check, "tiny" the test's,
#: "base" the paper's base model for a GPU (fewer steps than the paper's 100,000).
SIZES: dict[str, AblationSize] = {
    "cpu": AblationSize(),
    "quick": AblationSize(d_model=64, n_heads=8, d_ff=256, steps=150, warmup=40, eval_every=50,
                          batch_tokens=1200, train_size=8000, valid_sentences=300, bleu_sentences=100,
                          vocab_size=2000, lr_factor=0.5),
    "tiny": AblationSize(d_model=32, n_heads=8, d_ff=64, layers=1, steps=12, warmup=4, eval_every=6,
                         log_every=3, batch_tokens=400, train_size=600, valid_sentences=40, bleu_sentences=12,
                         vocab_size=300, lr_factor=1.0),
    "base": AblationSize(d_model=512, n_heads=8, d_ff=2048, layers=6, steps=3000, warmup=800, eval_every=250,
                         log_every=25, batch_tokens=8000, vocab_size=8000, lr_factor=1.0, bleu_sentences=1014),
}


@dataclass(frozen=True)
class Variant:
    """One ablation: a name, what it changes, and the paper's figures for it."""

    name: str
    group: str
    label: str
    change: Callable[[AblationSize], dict[str, Any]]
    paper: dict[str, Any] | None = None
    compare_to: str = "baseline"

    def settings(self, size: AblationSize) -> dict[str, Any]:
        """The changed settings at this size."""
        return dict(self.change(size))


TRAINING_FIELDS = ("label_smoothing", "clip_norm", "lr_schedule")
MODEL_FIELDS = ("d_model", "n_heads", "d_ff", "dropout", "norm_first", "tie_embeddings", "positional",
                "scale_attention", "d_qk", "embedding_init", "n_encoder_layers", "n_decoder_layers")
#: The groups of :data:`VARIANTS`: Table 3's rows, then what Table 3 does not test.
GROUPS = {"A": "Table 3 row A: heads at fixed d_model", "B": "Table 3 row B: width of queries and keys",
          "C": "Table 3 row C: model size", "D": "Table 3 row D: regularisation",
          "E": "Table 3 row E: positions", "schedule": "the learning-rate schedule (section 5.3, not in Table 3)",
          "departure": "the course's departures and choices Table 3 does not test"}


def _scaled(value: int, paper_value: int, paper_base: int) -> int:
    """``value`` scaled by the paper's ratio ``paper_value / paper_base`` (an exact division is checked)."""
    scaled = value * paper_value / paper_base
    if scaled != int(scaled) or scaled < 1:
        raise ValueError(f"cannot scale {value} by {paper_value}/{paper_base}: {scaled} is not a positive int")
    return int(scaled)


def _heads(h: int) -> Variant:
    """Row A: ``h`` heads in the paper (base 8), d_k = d_v = d_model / h, d_model kept."""
    paper = {1: (5.29, 24.9), 4: (5.00, 25.5), 16: (4.91, 25.8), 32: (5.01, 25.4)}[h]
    return Variant(f"heads_{h}", "A", f"{h} head{'s' if h > 1 else ''} instead of the paper's 8, d_k = d_v = "
                   "d_model / h",
                   lambda s: {"n_heads": _scaled(s.n_heads, h, PAPER_BASE["n_heads"])},
                   {"ppl": paper[0], "bleu": paper[1], "row": f"A: h={h}, d_k=d_v={512 // h}"})


def _row_c(field: str, paper_value: int, ppl: float, bleu: float, row: str, word: str) -> Variant:
    """Row C: ``field`` (d_model or d_ff) scaled as the paper's ``paper_value`` / base; all else kept.

    Where d_model changes, h is kept, so d_k = d_v = d_model / h changes with it (as in the paper).
    """
    return Variant(f"{field}_{word}", "C", f"{field} x {paper_value}/{PAPER_BASE[field]} (paper: {paper_value}), "
                   f"everything else kept",
                   lambda s: {field: _scaled(getattr(s, field), paper_value, PAPER_BASE[field])},
                   {"ppl": ppl, "bleu": bleu, "row": row})


_VARIANT_LIST = [
    Variant("baseline", "base", "the recipe: post-LN, warm-up then decay, sinusoids, eps_ls 0.1, P_drop 0.1, "
            "tied embeddings, token tables from N(0, 1/d_model), gradient clipping at 1", lambda s: {}, PAPER_BASE),
    *(_heads(h) for h in (1, 4, 16, 32)),
    Variant("dk_quarter", "B", "d_k x 16/64 (paper: d_k=16): queries and keys only; h and d_v kept",
            lambda s: {"d_qk": _scaled(s.d_model // s.n_heads, 16, PAPER_BASE["d_k"])},
            {"ppl": 5.16, "bleu": 25.1, "row": "B: d_k=16"}),
    _row_c("d_model", 256, 5.75, 24.5, "C: d_model=256, d_k=d_v=32", "half"),
    _row_c("d_model", 1024, 4.66, 26.0, "C: d_model=1024, d_k=d_v=128", "double"),
    _row_c("d_ff", 1024, 5.12, 25.4, "C: d_ff=1024", "half"),
    _row_c("d_ff", 4096, 4.75, 26.2, "C: d_ff=4096", "double"),
    Variant("dropout_0", "D", "P_drop 0.0", lambda s: {"dropout": 0.0},
            {"ppl": 5.77, "bleu": 24.6, "row": "D: P_drop=0.0"}),
    Variant("smoothing_0", "D", "eps_ls 0.0 (no label smoothing)", lambda s: {"label_smoothing": 0.0},
            {"ppl": 4.67, "bleu": 25.3, "row": "D: eps_ls=0.0"}),
    Variant("learned_pos", "E", "learned positional embeddings instead of sinusoids",
            lambda s: {"positional": "learned"}, {"ppl": 4.92, "bleu": 25.7, "row": "E: positional embedding"}),
    Variant("no_pos", "E", "no position information at all (not in Table 3)", lambda s: {"positional": "none"}),
    Variant("no_warmup", "schedule", "no warm-up, decay kept: the peak rate for the first warm-up steps, "
            "then the paper's 1/sqrt(step)", lambda s: {"lr_schedule": "decay_only"}),
    Variant("constant_lr", "schedule", "no warm-up and no decay: the peak rate at every step",
            lambda s: {"lr_schedule": "constant"}),
    Variant("pre_ln", "departure", "pre-LN (norm_first=True) instead of the paper's post-LN",
            lambda s: {"norm_first": True}),
    Variant("untied", "departure", "separate embeddings and output projection (the paper shares them)",
            lambda s: {"tie_embeddings": False}),
    Variant("no_clip", "departure", "no gradient clipping (the paper does not mention any)",
            lambda s: {"clip_norm": 0.0}),
    Variant("no_scale", "departure", "no division of the scores by sqrt(d_k)", lambda s: {"scale_attention": False}),
    Variant("xavier_embed", "departure", "token tables from Xavier-uniform (this course's start until it "
            "was fixed) instead of N(0, 1/d_model)", lambda s: {"embedding_init": "xavier"}),
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
    """The tokenized task shared by every job of a suite."""

    tokenizer: SharedTokenizer
    train_ids: list[tuple[list[int], list[int]]]
    valid_ids: list[tuple[list[int], list[int]]]
    bleu_pairs: list[tuple[str, str]]


def find_multi30k() -> Path | None:
    """The Multi30k folder named by ``$MINITRANSFORMER_MULTI30K_DIR``, or None.

    None lets :func:`load_ablation_data` use the package's cache (and download what is missing).
    """
    folder = os.environ.get(MULTI30K_ENV_VAR)
    return Path(folder).expanduser() if folder else None


def load_ablation_data(size: AblationSize, data_dir: str | Path | None = None, src_lang: str = "de",
                       tgt_lang: str = "en", cache_dir: str | Path | None = None) -> AblationData:
    """Multi30k (de -> en by default), its BPE tokenizer, and the fixed validation subsets."""
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
    """The model config and training settings of variant ``name`` at ``size``."""
    changes = variant(name).settings(size)
    unknown = sorted(set(changes) - set(TRAINING_FIELDS) - set(MODEL_FIELDS))
    if unknown:
        raise ValueError(f"variant {name!r} changes unknown settings {unknown}")
    training = {"label_smoothing": size.label_smoothing, "clip_norm": size.clip_norm, "lr_schedule": "inverse_sqrt"}
    training.update({k: v for k, v in changes.items() if k in TRAINING_FIELDS})
    # The baseline names every setting a variant may change, so that a later change of a package
    # default cannot change a stored suite's baseline (the token tables start from N(0, 1/d_model),
    # the scale of tensor2tensor's reference code; lesson 10 measures the Xavier start as a variant).
    model = dict(d_model=size.d_model, n_heads=size.n_heads, d_ff=size.d_ff, n_encoder_layers=size.layers,
                 n_decoder_layers=size.layers, dropout=size.dropout, tie_embeddings=True, max_len=256,
                 embedding_init="normal", norm_first=False, positional="sinusoidal", scale_attention=True,
                 d_qk=None)
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
    """
    started = time.perf_counter()
    device = torch.device(device)
    config, training = job_settings(size, name)
    tok = data.tokenizer
    config = config.replace(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, pad_id=tok.pad_id)
    set_seed(seed)
    model = Transformer(config).to(device)
    optimizer = paper_adam(model.parameters(), device)
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
            lr = optimizer.param_groups[0]["lr"]
            # Divided by the batch's target tokens, as the committed suite was trained (1 / n rounds to the same
            # float32 as the division for every n below 2**22: the same gradients).
            _, nll_sum, _ = train_step(model, [batch], optimizer, scheduler=scheduler, scale=1 / batch.n_tgt_tokens,
                                       label_smoothing=training["label_smoothing"], pad_id=tok.pad_id,
                                       clip_norm=training["clip_norm"])
            step += 1
            since_nll += nll_sum.cpu()
            since_tokens += batch.n_tgt_tokens
            if step % size.log_every == 0 or step == total:
                mean = float(since_nll) / since_tokens
                curve["step"].append(step)
                curve["train_nll"].append(mean if math.isfinite(mean) else None)  # type: ignore[arg-type]
                curve["lr"].append(lr)
                since_nll, since_tokens = torch.zeros(()), 0
                if progress is not None:
                    progress(step, mean)
                if loss_diverged(mean):
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
    """Set up a process of a suite's pool: its thread count and the task's data (loaded once per process)."""
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
    """Mean, sample standard deviation, minimum and maximum over seeds of each variant's figures."""
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
           "find_multi30k", "init_worker", "job_settings", "run_worker_job", "load_ablation_data", "run_ablation",
           "summarize", "validation_perplexity", "variant", "with_size"]
