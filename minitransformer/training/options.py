"""Every setting of a training run in one dataclass, with per-dataset recipes (lesson 07).

A field left at ``None`` takes the value of the dataset's recipe, then of the model preset.
Each field's metadata holds the help of its ``train`` flag: the command line is built from it.
"""

from __future__ import annotations

import math
from dataclasses import Field, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import torch

from ..config import TransformerConfig
from ..utils import check_seed
from .schedule import LR_SCHEDULES

DATASETS = ("dates", "multi30k", "text")
PRESETS = ("tiny", "small", "base", "big")
PRECISIONS = ("auto", "fp32", "bf16")

#: Defaults of each dataset for the fields left at None.
RECIPES: dict[str, dict[str, Any]] = {
    # Reaches full exact match on held-out dates in minutes on a CPU (docs/training.md).
    "dates": dict(
        preset="tiny", d_model=64, n_heads=4, d_ff=256, layers=2, dropout=0.0,
        vocab_size=1000, train_size=20_000, batch_tokens=2000,
        warmup=400, lr_factor=0.3,  # higher peaks learn as fast but swing between checks
        epochs=8,
        target=1.0, checks_per_epoch=4,  # stop soon after every validation date comes out right
    ),
    # The paper's base model, for a GPU. Multi30k's 29,000 pairs make ~120 steps of 4,096 tokens,
    # so the paper's 4,000 warm-up steps (for 100,000 steps of 25,000 tokens) would last 35 epochs.
    "multi30k": dict(
        preset="base", vocab_size=8000, batch_tokens=4096, warmup=1500, lr_factor=1.0, epochs=40,
    ),
    "text": dict(
        preset="base", vocab_size=8000, batch_tokens=4096, warmup=1500, lr_factor=1.0, epochs=40,
    ),
}
#: The recipes that replace :data:`RECIPES` off CUDA (CPU, or Apple's mps): a translator on a laptop.
CPU_RECIPES: dict[str, dict[str, Any]] = {
    # Chosen in 30-minute trials on the validation set, one idea at a time (benchmarks/recipe_search.py,
    # lesson 08b's "recipe in a time budget"): each line below beat the one it replaced.
    "multi30k": dict(
        preset="small",  # d_model 256, 3+3 layers: 6.6M weights with 4,000 tokens
        vocab_size=4000,  # a cheaper output layer than 8,000's, and no worse
        inner_dropout=0.0,  # P_drop 0.1 only where the paper puts it: each dropout mask costs CPU time
        label_smoothing=0.2,
        batch_tokens=1024,  # on a CPU a step costs its tokens: a quarter of the batch is four times the updates
        warmup=1600,  # ~3 epochs of ~520 steps
        lr_factor=0.5,  # a peak of 0.00078: the peak falls by sqrt 2 each time the batch halves
        minutes=30,  # with lr_schedule left at None: linear decay to zero at the planned end
        beam_alpha=2.2,  # on validation, the best of 1.0 to 3.0 in steps of 0.4 for this recipe (0.6 is the paper's)
        valid_sentences=300,  # a full greedy validation costs a minute an epoch on 2 cores
    ),
}


def recipe(dataset: str, device: str | torch.device = "auto") -> dict[str, Any]:
    """The defaults of ``dataset`` on ``device`` ("auto": CUDA if there is one): CPU_RECIPES off CUDA."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    name = str(device)
    cuda = torch.cuda.is_available() if name == "auto" else name.startswith("cuda")
    return dict(RECIPES[dataset] if cuda or dataset not in CPU_RECIPES else CPU_RECIPES[dataset])


def option(default: Any = None, doc: str = "", group: str = "training", **flag: Any) -> Any:
    """A field of :class:`TrainOptions` with the help of its flag; ``flag`` goes to ``add_argument``.

    ``group`` is the section of ``train --help``; ``otherwise`` (in ``flag``) says what a field
    left at None means where no recipe sets it.
    """
    return field(default=default, metadata={"doc": doc, "group": group, **flag})


@dataclass
class TrainOptions:
    """Settings of one training run: the ``train`` command's options, one field per flag."""

    dataset: str = option("dates", "dates (generated with Babel), multi30k (downloaded, checked, cached) or text "
                          "(your own parallel files)", "data", choices=DATASETS)
    src_locale: str = option("en_US", "dates: CLDR locale of the source", "data")
    tgt_locale: str = option("de_DE", "dates: CLDR locale of the target, e.g. de_DE, hu_HU, fr_FR", "data")
    # For dates runs, resolved() sets the languages from the locales, so the log says what was translated.
    src_lang: str | None = option(None, "multi30k: source language (default: the other of --tgt-lang, else de)",
                                  "data", choices=("de", "en"))
    tgt_lang: str | None = option(None, "multi30k: target language (default: the other of --src-lang)", "data",
                                  choices=("de", "en"))
    data_dir: str | None = option(None, "multi30k: an existing folder with its six .gz files (default: "
                                  "$MINITRANSFORMER_MULTI30K_DIR, else ~/.cache/minitransformer/multi30k, where "
                                  "missing files are downloaded)", "data")
    src_file: str | None = option(None, "text: training source sentences, one per line (plain or .gz)", "data")
    tgt_file: str | None = option(None, "text: training target sentences, line-aligned with the source", "data")
    valid_src_file: str | None = option(None, "text: validation source sentences, one per line (plain or .gz)",
                                        "data")
    valid_tgt_file: str | None = option(None, "text: validation target sentences, line-aligned with the source",
                                        "data")
    test_src_file: str | None = option(None, "text: test (optional) source sentences, one per line (plain or .gz)",
                                       "data")
    test_tgt_file: str | None = option(None, "text: test (optional) target sentences, line-aligned with the source",
                                       "data")
    train_size: int | None = option(None, "dates: number of training dates; multi30k/text: use only the first N "
                                    "training pairs", "data", otherwise="all")
    vocab_size: int | None = option(None, "largest shared BPE vocabulary, special tokens included", "data")
    preset: str | None = option(None, "model sizes of TransformerConfig.<preset>()", "model", choices=PRESETS)
    d_model: int | None = option(None, "width of the model, d_model", "model", otherwise="the preset's")
    n_heads: int | None = option(None, "attention heads, h", "model", otherwise="the preset's")
    d_ff: int | None = option(None, "inner width of the feed-forward network, d_ff", "model",
                              otherwise="the preset's")
    layers: int | None = option(None, "layers N of the encoder and of the decoder", "model", otherwise="the preset's")
    dropout: float | None = option(None, "dropout P_drop", "model", otherwise="the preset's")
    inner_dropout: float | None = option(None, "dropout on the attention weights and the feed-forward's hidden units "
                                         "(where nn.Transformer has it; the paper names only P_drop's places)",
                                         "model", otherwise="--dropout's")
    norm_first: bool | None = option(None, "pre-LN layers, a departure from the paper's post-LN (default: post-LN)",
                                     "model")
    embedding_init: str | None = option(None, "start of the token embedding tables: normal, N(0, 1/d_model), the "
                                        "size of the positional encoding once scaled by sqrt(d_model), as the "
                                        "paper's reference code; xavier, Xavier-uniform like every other matrix, far "
                                        "smaller (default: normal)", "model", choices=("normal", "xavier"))
    device: str = option("auto", "auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps")
    threads: int | None = option(None, "CPU threads of PyTorch during the run (default: 1 for models under 20M "
                                 "parameters on a CPU, which keeps them fast on a busy machine; else PyTorch's; "
                                 "OMP_NUM_THREADS is respected)")
    allow_slow: bool = option(False, "start a CPU run estimated to take more than 2 hours (refused otherwise, with "
                              "the estimate)")
    precision: str = option("auto", "fp32, or bf16 autocast; auto is bf16 on a CUDA GPU that supports it",
                            choices=PRECISIONS)
    compile: bool = option(False, "wrap the model in torch.compile (best on a GPU)")
    batch_tokens: int | None = option(None, "token budget of each side of a batch, padding included; the paper used "
                                      "~25000")
    accumulate: int = option(1, "batches whose gradients add up before each optimizer step")
    epochs: int | None = option(None, "passes over the training data")
    max_steps: int | None = option(None, "stop after this many optimizer steps (with --epochs, whichever comes "
                                   "first; alone, no epoch limit)")
    minutes: float | None = option(None, "train for this many minutes, validation and checkpoints included (not the "
                                   "set-up before, nor the test after, which prints its own time): the run times "
                                   "its first steps, plans the steps that fit, plans again as its speed changes, and "
                                   "decays the learning rate linearly to zero at the planned end")
    time_budget: float | None = option(None, "stop after the step that passes this many seconds of training "
                                       "(compilation and validation included), with no plan: the schedule does "
                                       "not know the end (--minutes plans for it)")
    warmup: int | None = option(None, "warm-up steps of the learning rate (paper: 4000)")
    lr_factor: float | None = option(None, "lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)")
    lr_schedule: str | None = option(None, "inverse_sqrt: the paper's warm-up then decay; constant: its peak rate "
                                     "from the first step, no warm-up; linear_decay: the paper's warm-up to the "
                                     "same peak, then straight down to zero at the run's end (--minutes' plan, else "
                                     "--max-steps or --epochs) (default: linear_decay with --minutes, else "
                                     "inverse_sqrt)", choices=("inverse_sqrt", "constant", "linear_decay"))
    label_smoothing: float | None = option(None, "epsilon of label smoothing", otherwise="0.1 (the paper's)")
    clip_norm: float = option(1.0, "clip the gradient norm to this; 0: no clipping")
    target: float | None = option(None, "stop once the validation exact match (a fraction in (0, 1], dates) or BLEU "
                                  "(multi30k, text) reaches this; 0: never")
    checks_per_epoch: int | None = option(None, "with a target: validate this many times per epoch, evenly spaced, "
                                          "so that the run stops soon after it first reaches the target; 1: at "
                                          "epoch ends only")
    eval_sentences: int | None = option(None, "validation (at each check) and test (at the end) sentences "
                                        "translated for the quality figure (default: all)")
    valid_sentences: int | None = option(None, "translate at most this many validation sentences at each check; "
                                         "the test split is not affected", otherwise="as --eval-sentences")
    out: str | None = option(None, "output folder for checkpoints, log.jsonl, loss.png, tokenizer.json; a folder "
                             "holding other files is refused without --overwrite, except the log.jsonl and "
                             "tokenizer.json of a run stopped before its first checkpoint (default: runs/<dataset>; "
                             "with --resume FILE_OR_FOLDER, that run's folder)", "output")
    resume: str | None = option(None, "continue from the newest checkpoint of --out, or of the given checkpoint file "
                                "or run folder; not with --overwrite", "output", nargs="?", const="auto")
    overwrite: bool = option(False, "start afresh in an --out folder that holds checkpoints of an earlier run "
                             "(replaced once the new run has written its first checkpoint)", "output")
    seed: int = option(0, "seed of initialisation, dropout and batch order")
    log_every: int = option(10, "steps between records of log.jsonl", "output")
    save_every: int | None = option(None, "also write a checkpoint every N steps (default: at the end of each epoch "
                                    "only)", "output")
    keep: int = option(5, "newest checkpoints kept", "output")
    show: int = option(5, "test translations printed at the end; 0: none", "output")
    test_beam: int = option(4, "the test split is scored with greedy decoding and with beam search of this size "
                            "(paper: 4); 1: greedy only", "output")
    beam_alpha: float | None = option(None, "length penalty alpha of the test's beam search, kept with the model as "
                                      "translate's default", "output", otherwise="0.6 (the paper's)")

    def __post_init__(self) -> None:
        self._check_types()
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {self.preset!r}")
        if self.lr_schedule is not None and self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        for name in ("src_locale", "tgt_locale"):
            if not getattr(self, name).strip():
                raise ValueError(f"{name} must be a CLDR locale such as 'en_US', 'de_DE' or 'hu_HU', "
                                 f"got {getattr(self, name)!r}")
        for name in ("src_lang", "tgt_lang"):
            if getattr(self, name) is not None and not getattr(self, name):
                raise ValueError(f"{name} must be a language code such as 'de' or 'en', got ''")
        check_seed(self.seed)
        check_device_name(self.device, "device")
        for name in ("accumulate", "log_every", "keep", "test_beam"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.show < 0:
            raise ValueError(f"show must be >= 0 (translations printed at the end), got {self.show}")
        for name in ("train_size", "vocab_size", "batch_tokens", "epochs", "max_steps", "warmup", "eval_sentences",
                     "valid_sentences", "checks_per_epoch", "save_every", "d_model", "n_heads", "d_ff", "layers",
                     "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 when given, got {value}")
        if self.time_budget is not None and not self.time_budget > 0:
            raise ValueError(f"time_budget must be a positive number of seconds, got {self.time_budget}")
        self._check_minutes()
        for name in ("label_smoothing", "clip_norm", "dropout", "inner_dropout", "lr_factor", "target", "beam_alpha"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.label_smoothing is not None and not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        for name in ("dropout", "inner_dropout"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.beam_alpha is not None and self.beam_alpha < 0:
            raise ValueError(f"beam_alpha (the length penalty of beam search) must be >= 0, got {self.beam_alpha}")
        if self.clip_norm < 0:
            raise ValueError(f"clip_norm must be >= 0 (0 switches clipping off), got {self.clip_norm}")
        if self.lr_factor is not None and not self.lr_factor > 0:
            raise ValueError(f"lr_factor must be positive, got {self.lr_factor}")
        if self.target is not None and self.target < 0:
            raise ValueError(f"target must be >= 0 (0 switches the early stop off), got {self.target}")
        if self.target is not None and self.dataset == "dates" and self.target > 1:
            raise ValueError(f"target is a fraction of exact matches for the dates dataset: expected a number in "
                             f"(0, 1] (e.g. 0.99), or 0 to switch the early stop off, got {self.target:g}")
        if self.target is not None and self.dataset != "dates" and self.target > 100:
            raise ValueError(f"target is a BLEU score for the {self.dataset} dataset: expected a number in "
                             f"(0, 100], or 0 to switch the early stop off, got {self.target:g}")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite exclude each other: resume continues the run in its folder, "
                             "overwrite deletes it and starts afresh; give one of them")
        if self.dataset == "text":
            needed = ("src_file", "tgt_file", "valid_src_file", "valid_tgt_file")
            missing = [n for n in needed if getattr(self, n) is None]
            if missing:
                flags = ", ".join("--" + n.replace("_", "-") for n in missing)
                raise ValueError(f"dataset 'text' needs training and validation files; missing {flags}")
            if (self.test_src_file is None) != (self.test_tgt_file is None):
                raise ValueError("give both --test-src-file and --test-tgt-file, or neither")

    def _check_minutes(self) -> None:
        """A ValueError for a time budget that is not a length of time, or that another option contradicts."""
        if self.minutes is None:
            return
        if not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ValueError(f"minutes must be a positive number of minutes of training (e.g. 30), got {self.minutes}")
        if self.time_budget is not None:
            raise ValueError(f"minutes and time_budget are two time limits for one run: give minutes (a plan, the "
                             f"learning rate reaching zero at its end) or time_budget (seconds, a plain stop), not "
                             f"both; got minutes={self.minutes:g} and time_budget={self.time_budget:g}")
        if self.epochs is not None:
            raise ValueError(f"minutes plans the run's length (its steps, so its epochs) from the machine's speed: "
                             f"give minutes or epochs, not both (max_steps may still stop a timed run early); "
                             f"got minutes={self.minutes:g} and epochs={self.epochs}")

    def _check_types(self) -> None:
        """A TypeError for a field of the wrong type (``dropout="0.1"``, ``epochs=2.5``)."""
        for f in fields(self):
            value, base, optional = getattr(self, f.name), field_type(f), f.type.endswith("| None")
            if value is None and optional:
                continue
            # bool is an int to Python, but True epochs is a mistake; an int is fine where a float is wanted.
            kinds = (int, float) if base is float else (base,)
            if not isinstance(value, kinds) or (isinstance(value, bool) and base is not bool):
                expected = "a number" if base is float else base.__name__
                raise TypeError(f"{f.name} must be {expected}{' or None' if optional else ''}, "
                                f"got {type(value).__name__} {value!r}")

    def resolved(self) -> TrainOptions:
        """A copy with every None that the recipe for the run's device knows filled in, and ``out`` set.

        A recipe's ``minutes`` (the laptop translator's budget) gives way to a length given in ``epochs``,
        ``max_steps`` or ``time_budget``. ``epochs`` stays None (no limit) when ``max_steps`` or ``minutes`` is
        set; with ``minutes``, so does the recipe's ``target``: a timed run uses its time, so that its learning
        rate reaches zero. ``lr_schedule`` left at None is linear_decay with ``minutes``, else inverse_sqrt;
        ``label_smoothing`` and ``beam_alpha`` are the paper's 0.1 and 0.6 where the recipe has none.
        """
        defaults = recipe(self.dataset, self.device)
        if self.epochs is not None or self.max_steps is not None or self.time_budget is not None:
            defaults.pop("minutes", None)  # a length given in epochs, steps or seconds replaces the recipe's budget
        minutes = self.minutes if self.minutes is not None else defaults.get("minutes")
        if self.max_steps is not None or minutes is not None:
            defaults.pop("epochs", None)
        if minutes is not None:
            defaults.pop("target", None)
        defaults.setdefault("lr_schedule", "linear_decay" if minutes is not None else "inverse_sqrt")
        defaults.setdefault("label_smoothing", 0.1)  # the paper's values, where the recipe has none
        defaults.setdefault("beam_alpha", 0.6)
        if self.preset is not None and self.preset != defaults.get("preset"):
            # An explicitly chosen preset brings its own sizes, not the recipe's overrides.
            for name in ("d_model", "n_heads", "d_ff", "layers", "dropout", "inner_dropout"):
                defaults.pop(name, None)
        changes = {k: v for k, v in defaults.items() if getattr(self, k) is None}
        changes.update(self._languages())
        if self.out is None:
            changes["out"] = resume_folder(self.resume) or f"runs/{self.dataset}"
        return replace(self, **changes)

    def _languages(self) -> dict[str, str | None]:
        """src_lang and tgt_lang as they should be recorded for this dataset."""
        if self.dataset == "dates":
            # The languages of the two locales ("en_US" -> "en"), not Multi30k's defaults.
            return {"src_lang": self.src_locale.split("_")[0].split("-")[0],
                    "tgt_lang": self.tgt_locale.split("_")[0].split("-")[0]}
        if self.dataset == "multi30k":
            other = {"de": "en", "en": "de"}
            src = self.src_lang or other.get(self.tgt_lang or "", "de")
            return {"src_lang": src, "tgt_lang": self.tgt_lang or other.get(src, "en")}
        return {}

    def model_config(self, vocab_size: int, pad_id: int = 0) -> TransformerConfig:
        """The model's config: the preset, then every size given here."""
        overrides: dict[str, Any] = {"pad_id": pad_id}
        for name in ("d_model", "n_heads", "d_ff", "dropout", "inner_dropout", "norm_first", "embedding_init"):
            if getattr(self, name) is not None:
                overrides[name] = getattr(self, name)
        if self.layers is not None:
            overrides["n_encoder_layers"] = overrides["n_decoder_layers"] = self.layers
        preset = getattr(TransformerConfig, self.preset or "base")
        return preset(vocab_size, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """The run's settings as a plain dict, for checkpoints and the log.

        ``threads`` and ``allow_slow`` are left out: they belong to one invocation on one machine,
        not to the run a later ``--resume`` continues.
        """
        return {k: v for k, v in asdict(self).items() if k not in ("threads", "allow_slow")}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainOptions:
        """Inverse of :meth:`to_dict`; keys this version does not know are dropped."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def field_type(f: Field[Any]) -> type:
    """The type of a :class:`TrainOptions` field, None aside: str, int, float or bool."""
    return {"str": str, "int": int, "float": float, "bool": bool}[f.type.split(" | ")[0]]


def resume_folder(resume: str | None) -> str | None:
    """The run folder of ``resume`` (a checkpoint file or a run folder); None for "auto" or None.

    A resumed run writes into the folder its checkpoint is in now, wherever it was moved since.
    """
    if not resume or resume == "auto":
        return None
    path = Path(resume)
    return str(path if path.is_dir() else path.parent)


def check_device_name(device: Any, name: str = "device") -> None:
    """A ValueError unless ``device`` is "auto" or a name ``torch.device`` accepts (not whether it exists here)."""
    if not isinstance(device, str):
        raise TypeError(f"{name} must be a string such as 'auto', 'cpu' or 'cuda:0', got {device!r}")
    if device == "auto":
        return
    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"{name} must be auto, cpu, cuda, cuda:<index> or mps, got {device!r}") from None
