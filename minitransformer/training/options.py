"""Every setting of a training run in one dataclass, with per-dataset recipes (lesson 07).

A field left at ``None`` takes the value of the dataset's recipe (:data:`RECIPES`), then of
the model preset. The ``dates`` recipe is what ``python -m minitransformer train`` runs: a
2+2-layer d_model=64 model that reaches full exact match on held-out dates in minutes on a CPU
(docs/training.md, "How long training takes"). Its peak learning rate is gentle (factor 0.3,
warm-up 400) because higher rates learn as fast but swing between checks, and it stops as soon as
every validation date comes out right; the best check's weights (``best.pt``) are the ones tested.
The ``multi30k`` and ``text`` recipes are the paper's base model for a GPU, with a warm-up
shortened to the size of the data set. On a machine without a CUDA GPU, ``multi30k`` takes its
laptop recipe instead (:data:`CPU_RECIPES`): the ``small`` model (d_model 256, 3+3 layers, 7.6M
weights with its 8,000-token vocabulary), 10 epochs, and validation BLEU on the first 300 sentences
(docs/training.md, "A real translator on a laptop", gives the measured figures).
"""

from __future__ import annotations

import math
from pathlib import Path
from dataclasses import asdict, dataclass, fields, replace
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
    "dates": dict(
        preset="tiny", d_model=64, n_heads=4, d_ff=256, layers=2, dropout=0.0,
        vocab_size=1000, train_size=20_000, batch_tokens=2000, warmup=400, lr_factor=0.3,
        epochs=8, target=1.0, checks_per_epoch=4,
    ),
    # Multi30k is small: 29,000 pairs make ~120 steps of 4,096 tokens, so the paper's 4,000
    # warm-up steps (for 100,000 steps of 25,000 tokens) would last 35 epochs.
    "multi30k": dict(
        preset="base", vocab_size=8000, batch_tokens=4096, warmup=1500, lr_factor=1.0, epochs=40,
    ),
    "text": dict(
        preset="base", vocab_size=8000, batch_tokens=4096, warmup=1500, lr_factor=1.0, epochs=40,
    ),
}
#: The recipes that replace :data:`RECIPES` on a machine without a CUDA GPU (CPU, or Apple's mps).
#: Multi30k on a laptop: the ``small`` preset, a warm-up of 400 steps (~3.5 epochs of ~115
#: steps), a gentler factor (peak rate 0.0016), 10 epochs; each epoch's validation translates
#: only the first 300 sentences greedily (a full validation would cost a minute an epoch on
#: 2 cores); the test split is still scored in full.
CPU_RECIPES: dict[str, dict[str, Any]] = {
    "multi30k": dict(
        preset="small", vocab_size=8000, batch_tokens=4096, warmup=400, lr_factor=0.5, epochs=10,
        valid_sentences=300,
    ),
}


def recipe(dataset: str, device: str | torch.device = "auto") -> dict[str, Any]:
    """The defaults of ``dataset`` on ``device``: :data:`CPU_RECIPES` off CUDA where there is one, else :data:`RECIPES`.

    Args:
        dataset: one of :data:`DATASETS`.
        device: "auto" (CUDA when available, as the run would choose), or a device name.
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    name = str(device)
    cuda = torch.cuda.is_available() if name == "auto" else name.startswith("cuda")
    return dict(RECIPES[dataset] if cuda or dataset not in CPU_RECIPES else CPU_RECIPES[dataset])


@dataclass
class TrainOptions:
    """Settings of one training run; the command line's ``train`` options, one for one.

    Args:
        dataset: "dates", "multi30k" or "text".
        src_locale: dates: CLDR locale of the source (e.g. "en_US").
        tgt_locale: dates: CLDR locale of the target (e.g. "de_DE", "hu_HU").
        src_lang: multi30k: source language, "de" or "en" (default: the other of
            ``tgt_lang``, else "de"). For dates runs it is set to the source locale's
            language, so that the log says what was translated.
        tgt_lang: multi30k: target language (default: the other of ``src_lang``).
        data_dir: multi30k: folder with its files (else $MINITRANSFORMER_MULTI30K_DIR or the cache).
        src_file: text: training source file, one sentence per line (plain or .gz).
        tgt_file: text: training target file, line-aligned with ``src_file``.
        valid_src_file: text: validation source file.
        valid_tgt_file: text: validation target file.
        test_src_file: text: optional test source file.
        test_tgt_file: text: optional test target file.
        train_size: dates: number of training dates; multi30k/text: use only the first N pairs.
        vocab_size: largest BPE vocabulary (special tokens included).
        preset: model preset "tiny", "small", "base" or "big".
        d_model, n_heads, d_ff, layers, dropout, norm_first: override the preset
            (``layers`` sets both stacks).
        embedding_init: how the token embedding tables start, "normal" or "xavier" (None: the
            config's default, "normal"; see :class:`~minitransformer.config.TransformerConfig`).
        device: "auto", "cpu", "cuda", "cuda:1", "mps".
        threads: CPU threads of PyTorch during the run (None: one thread for models below
            :data:`~minitransformer.training.cpu.ONE_THREAD_BELOW` parameters on a CPU,
            else PyTorch's default; ``OMP_NUM_THREADS``, when set, is respected).
        allow_slow: start a run whose estimated time on a CPU exceeds
            :data:`~minitransformer.training.cpu.SLOW_RUN_SECONDS` (otherwise refused).
        precision: "auto" (bf16 on a CUDA GPU that supports it, else fp32), "fp32" or "bf16".
        compile: wrap the model in ``torch.compile``.
        batch_tokens: token budget of each side of a batch (paper: ~25,000).
        accumulate: batches whose gradients add up before each optimizer step.
        epochs: passes over the training data.
        max_steps: stop after this many optimizer steps (whichever of the two comes first).
        time_budget: stop after the step that passes this many seconds of training (the
            loop itself: compilation and validation count, setup does not); None: no limit.
        warmup: warm-up steps of the learning-rate schedule (paper: 4000).
        lr_factor: factor of the schedule.
        lr_schedule: "inverse_sqrt" (the paper: warm-up, then 1/sqrt(step)) or "constant"
            (the schedule's peak rate from the first step on: no warm-up; lesson 10's ablation).
        label_smoothing: eps_ls (paper: 0.1).
        clip_norm: clip the gradient norm to this; 0 switches clipping off.
        target: stop once the validation quality figure (exact match, a fraction in (0, 1],
            for dates; BLEU in (0, 100] otherwise) reaches this; 0 switches the rule off.
        checks_per_epoch: with a ``target``, validate this many times per epoch (evenly spaced,
            the last at the epoch's end), so that a run stops soon after it first reaches the
            target rather than up to an epoch later; 1: at epoch ends only.
        eval_sentences: validation (each epoch) and test (at the end) sentences translated
            for the quality figure (None: all).
        valid_sentences: translate at most this many validation sentences at each check
            (None: as ``eval_sentences``); the test split is not affected.
        out: output folder (default: the run folder of ``resume`` when it names a checkpoint
            or folder, else ``runs/<dataset>``). A new run refuses a folder that holds files
            but no run unless ``overwrite``; a resumed run refuses one that holds another run's.
        resume: checkpoint file or run folder to continue from ("auto": the newest checkpoint of ``out``).
        overwrite: start afresh in an output folder that holds an earlier run's checkpoints
            (not together with ``resume``).
        seed: seed of the model's initialisation, dropout and batch order.
        log_every: steps between the records of the JSON lines log.
        save_every: also write a checkpoint every this many steps (None: at epoch ends only).
        keep: checkpoints kept in the folder (the oldest are deleted).
        show: translations printed at the end (0: none).
        test_beam: beam size of a second test translation (paper: 4, length penalty 0.6);
            1 scores greedy decoding only.
    """

    dataset: str = "dates"
    src_locale: str = "en_US"
    tgt_locale: str = "de_DE"
    src_lang: str | None = None
    tgt_lang: str | None = None
    data_dir: str | None = None
    src_file: str | None = None
    tgt_file: str | None = None
    valid_src_file: str | None = None
    valid_tgt_file: str | None = None
    test_src_file: str | None = None
    test_tgt_file: str | None = None
    train_size: int | None = None
    vocab_size: int | None = None
    preset: str | None = None
    d_model: int | None = None
    n_heads: int | None = None
    d_ff: int | None = None
    layers: int | None = None
    dropout: float | None = None
    norm_first: bool | None = None
    embedding_init: str | None = None
    device: str = "auto"
    threads: int | None = None
    allow_slow: bool = False
    precision: str = "auto"
    compile: bool = False
    batch_tokens: int | None = None
    accumulate: int = 1
    epochs: int | None = None
    max_steps: int | None = None
    time_budget: float | None = None
    warmup: int | None = None
    lr_factor: float | None = None
    lr_schedule: str = "inverse_sqrt"
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    target: float | None = None
    checks_per_epoch: int | None = None
    eval_sentences: int | None = None
    valid_sentences: int | None = None
    out: str | None = None
    resume: str | None = None
    overwrite: bool = False
    seed: int = 0
    log_every: int = 10
    save_every: int | None = None
    keep: int = 5
    show: int = 5
    test_beam: int = 4

    def __post_init__(self) -> None:
        self._check_types()
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {PRESETS}, got {self.preset!r}")
        if self.lr_schedule not in LR_SCHEDULES:
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
        for name in ("train_size", "vocab_size", "batch_tokens", "epochs", "max_steps", "warmup",
                     "eval_sentences", "valid_sentences", "checks_per_epoch", "save_every", "d_model", "n_heads", "d_ff", "layers", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 when given, got {value}")
        if self.time_budget is not None and not self.time_budget > 0:
            raise ValueError(f"time_budget must be a positive number of seconds, got {self.time_budget}")
        for name in ("label_smoothing", "clip_norm", "dropout", "lr_factor", "target"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
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

    def _check_types(self) -> None:
        """A TypeError for a field of the wrong type (``dropout="0.1"``, ``epochs=2.5``)."""
        for f in fields(self):
            value = getattr(self, f.name)
            kinds = _FIELD_TYPES[f.name]
            if value is None and type(None) in kinds:
                continue
            # bool is an int to Python, but True epochs is a mistake; an int is fine where a float is wanted.
            ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
            if not ok:
                names = ["a number" if k is float else "None" if k is type(None) else k.__name__
                         for k in kinds if not (k is int and float in kinds)]
                expected = " or ".join(names)
                raise TypeError(f"{f.name} must be {expected}, got {type(value).__name__} {value!r}")

    def resolved(self) -> TrainOptions:
        """A copy with every None that the dataset's recipe knows filled in, and ``out`` set.

        ``epochs`` stays None (no limit) when ``max_steps`` is given. The recipe is the one for
        the run's device (:func:`recipe`): on a machine without a CUDA GPU, Multi30k trains the
        laptop-sized model of :data:`CPU_RECIPES`.
        """
        defaults = recipe(self.dataset, self.device)
        if self.max_steps is not None:
            defaults.pop("epochs", None)
        if self.preset is not None and self.preset != defaults.get("preset"):
            # An explicitly chosen preset brings its own sizes, not the recipe's overrides.
            for name in ("d_model", "n_heads", "d_ff", "layers", "dropout"):
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
        """The model's config: the preset, then every size given here.

        Args:
            vocab_size: size of the shared vocabulary.
            pad_id: the tokenizer's padding id.
        """
        overrides: dict[str, Any] = {"pad_id": pad_id}
        for name in ("d_model", "n_heads", "d_ff", "dropout", "norm_first", "embedding_init"):
            if getattr(self, name) is not None:
                overrides[name] = getattr(self, name)
        if self.layers is not None:
            overrides["n_encoder_layers"] = overrides["n_decoder_layers"] = self.layers
        preset = getattr(TransformerConfig, self.preset or "base")
        return preset(vocab_size, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for checkpoints and the log) of the run's settings.

        ``threads`` and ``allow_slow`` are left out: they are choices of one invocation on one
        machine, not settings a resumed run should inherit (the log's setup record holds the
        thread count used).
        """
        return {k: v for k, v in asdict(self).items() if k not in _PER_INVOCATION}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainOptions:
        """Inverse of :meth:`to_dict`; keys this version does not know are dropped."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def resume_folder(resume: str | None) -> str | None:
    """The run folder that ``resume`` (a checkpoint file or a run folder) belongs to; None for "auto" or None.

    A resumed run writes into the folder its checkpoint is in, wherever that folder has been
    moved or renamed to since (not into the ``out`` recorded in the checkpoint).
    """
    if not resume or resume == "auto":
        return None
    path = Path(resume)
    return str(path if path.is_dir() else path.parent)


def check_device_name(device: Any, name: str = "device") -> None:
    """A ValueError unless ``device`` is "auto" or a string that ``torch.device`` accepts.

    Whether the device exists on this machine is checked when the run starts.
    """
    if not isinstance(device, str):
        raise TypeError(f"{name} must be a string such as 'auto', 'cpu' or 'cuda:0', got {device!r}")
    if device == "auto":
        return
    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"{name} must be auto, cpu, cuda, cuda:<index> or mps, got {device!r}") from None


_PER_INVOCATION = ("threads", "allow_slow")
_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    f.name: {"str": (str,), "str | None": (str, type(None)), "int": (int,), "int | None": (int, type(None)),
             "float": _NUMBER, "float | None": (*_NUMBER, type(None)), "bool": (bool,),
             "bool | None": (bool, type(None))}[str(f.type)]
    for f in fields(TrainOptions)
}
