"""Checkpoints: written atomically, read safely (``weights_only``), checked against the model, averaged (lesson 08).

A checkpoint holds only tensors and plain values: ``format``, ``format_version``, ``config``, ``tokenizer``
(its JSON, so translation uses the training vocabulary), ``model``, ``optimizer``, ``scheduler``, ``step``,
``epoch``, ``batches_done``, ``rng`` and ``running`` (one per process: a resumed run logs what an
uninterrupted one would), ``options`` and ``metrics``. Reading checks the config against the weights'
shapes before building anything, so a damaged file cannot make the reader allocate a model of its own invention.
"""

from __future__ import annotations

import pickle
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torch import nn

from ..config import TransformerConfig
from ..data import SharedTokenizer
from ..model import Transformer
from ..utils import atomic_write
from .checkpoint_files import (  # noqa: F401 - re-exported
    BEST,
    CHECKPOINT_PATTERN,
    REPLACED_RUN,
    checkpoint_path,
    checkpoint_step,
    checkpoint_to_resume,
    latest_checkpoint,
    list_checkpoints,
    run_folder_of,
)

FORMAT = "minitransformer-checkpoint"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, foreign, or for another model."""


# --- random states ------------------------------------------------------------
def capture_rng_state() -> dict[str, Any]:
    """The random states of Python, NumPy and PyTorch (CPU and CUDA) as tensors and plain values."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


# --- writing ------------------------------------------------------------------
def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file in the same folder, then rename it to ``path``.

    A crash or a second Ctrl-C while writing leaves the previous file (or none), never a
    half-written one.
    """
    return atomic_write(path, lambda handle: torch.save(obj, handle))


def atomic_copy(source: str | Path, target: str | Path) -> Path:
    """Copy a file through a temporary file and ``os.replace``, like :func:`atomic_torch_save`."""
    def copy(handle: BinaryIO) -> None:
        with open(source, "rb") as original:
            shutil.copyfileobj(original, handle)

    return atomic_write(target, copy)


def make_checkpoint(
    model: Transformer,
    tokenizer: SharedTokenizer,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    step: int = 0,
    epoch: int = 0,
    batches_done: int = 0,
    rng: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    running: list[dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Gather everything a checkpoint holds into one dict of tensors and plain values."""
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be the bare Transformer (unwrap DDP / torch.compile), got {type(model).__name__}")
    checkpoint: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": model.config.to_dict(),
        "tokenizer": tokenizer.to_str(),
        "model": model.state_dict(),
        "step": int(step),
        "epoch": int(epoch),
        "batches_done": int(batches_done),
        "rng": rng if rng is not None else [capture_rng_state()],
        "options": dict(options or {}),
        "metrics": dict(metrics or {}),
        "running": list(running or []),
        "torch_version": str(torch.__version__),
    }
    if optimizer is not None:
        checkpoint["optimizer"] = optimizer.state_dict()
    if scheduler is not None:
        checkpoint["scheduler"] = scheduler.state_dict()
    return checkpoint


def save_checkpoint(path: str | Path, model: Transformer, tokenizer: SharedTokenizer, **fields: Any) -> Path:
    """Build a checkpoint with :func:`make_checkpoint` and write it atomically."""
    return atomic_torch_save(make_checkpoint(model, tokenizer, **fields), path)


# --- reading ------------------------------------------------------------------
def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read and check a checkpoint file with ``torch.load(weights_only=True)``."""
    path = latest_checkpoint(path)
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        text = str(error)
        if "Weights only load failed" not in text:
            raise CheckpointError(f"checkpoint {path} is truncated or corrupted (torch.load said: {text})") from error
        reason = next((line.split("error:", 1)[1].split(". ")[0].strip() for line in text.splitlines()
                       if "WeightsUnpickler error:" in line), "it holds Python objects")
        raise CheckpointError(
            f"checkpoint {path} is not a minitransformer checkpoint: it holds objects that "
            f"torch.load(weights_only=True) refuses to rebuild ({reason}); minitransformer writes only "
            "tensors and plain values"
        ) from error
    except Exception as error:  # a damaged file fails in many ways inside the unpickler
        size = path.stat().st_size
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted ({size} bytes; torch.load said: "
            f"{str(error).splitlines()[0] if str(error) else type(error).__name__}); use an earlier "
            "checkpoint of the run or train again"
        ) from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        found = sorted(checkpoint)[:8] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(
            f"checkpoint {path} is not a minitransformer checkpoint: expected a dict with "
            f"format={FORMAT!r}, found {found}"
        )
    version = checkpoint.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {version}, but this minitransformer reads "
            f"version {FORMAT_VERSION}"
        )
    for key in ("config", "tokenizer", "model", "step"):
        if key not in checkpoint:
            raise CheckpointError(f"checkpoint {path} is not a complete minitransformer checkpoint: '{key}' is missing")
    checkpoint_tokenizer(checkpoint, path)
    _check_sizes(checkpoint, path)
    _check_finite(checkpoint, path)
    return checkpoint


def _check_finite(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Refuse weights holding NaN or infinity (a run that diverged): they translate nothing and resume nothing."""
    seen: set[int] = set()  # tied weights share one storage: name it once
    bad = []
    for k, v in checkpoint["model"].items():
        if v.is_floating_point() and v.untyped_storage().data_ptr() not in seen:
            seen.add(v.untyped_storage().data_ptr())
            if not bool(torch.isfinite(v).all()):
                bad.append(k)
    if bad:
        more = f" and {len(bad) - 2} more" if len(bad) > 2 else ""
        raise CheckpointError(f"checkpoint {path} holds non-finite weights (NaN or infinity) in {len(bad)} "
                              f"tensor(s) ({', '.join(bad[:2])}{more}): the run had diverged when it was written; "
                              "use an earlier checkpoint of the run")


def check_resumable(checkpoint: dict[str, Any], path: str | Path = "") -> None:
    """Raise :class:`CheckpointError` unless the checkpoint holds what resuming training needs."""
    missing = [k for k in ("optimizer", "scheduler") if not isinstance(checkpoint.get(k), dict)]
    if missing:
        what = " (an averaged checkpoint)" if "averaged_from" in checkpoint else ""
        raise CheckpointError(f"checkpoint {path}{what} holds no {' or '.join(missing)} state: it can translate "
                              "but not resume training; resume from a checkpoint-<step>.pt of the run")


def checkpoint_tokenizer(checkpoint: dict[str, Any], path: str | Path = "") -> SharedTokenizer:
    """The tokenizer stored in a checkpoint; :class:`CheckpointError` naming the file if it is unreadable."""
    text = checkpoint.get("tokenizer")
    if not isinstance(text, str):
        raise CheckpointError(f"checkpoint {path} holds no tokenizer JSON: 'tokenizer' is a {type(text).__name__}")
    try:
        return SharedTokenizer.from_str(text)
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path} holds a tokenizer that cannot be read: {error}") from error


#: Largest positional table (max_len x d_model floats) a checkpoint may ask for: 1 GiB.
MAX_TABLE_BYTES = 2**30


def _check_sizes(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Check the stored config against the stored weights' shapes, building nothing real.

    A model of the config is built on PyTorch's "meta" device, which records shapes and holds
    no memory, after two cheap checks (layer counts and the positional table) that keep even
    that quick.
    """
    weights = checkpoint["model"]
    if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
        raise CheckpointError(f"checkpoint {path} is damaged: 'model' is not a dict of tensors")
    if not isinstance(checkpoint["config"], dict):
        raise CheckpointError(f"checkpoint {path} is damaged: 'config' is a {type(checkpoint['config']).__name__}, "
                              "not a dict")
    try:
        config = TransformerConfig.from_dict(checkpoint["config"])
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint {path} holds an invalid model config: {error}") from error
    table = config.max_len * config.d_model * 4
    if table > MAX_TABLE_BYTES:
        raise CheckpointError(
            f"checkpoint {path} claims max_len={config.max_len} and d_model={config.d_model}: its positional "
            f"table alone would take {table / 2**30:,.1f} GiB (at most {MAX_TABLE_BYTES // 2**30} GiB is accepted)"
        )
    for stack, claimed in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        held = len({k.split(".")[2] for k in weights if k.startswith(f"{stack}.layers.")})
        if held != claimed:
            raise CheckpointError(f"checkpoint {path} claims {claimed} {stack} layers but holds the weights of {held}")
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in Transformer(config).state_dict().items()}
    found = {k: tuple(v.shape) for k, v in weights.items()}
    wrong = [f"{k} is {found[k]} (expected {expected[k]})" for k in expected if k in found and found[k] != expected[k]]
    wrong += [f"{k} is missing" for k in expected if k not in found]
    wrong += [f"{k} is not part of the model" for k in found if k not in expected]
    if wrong:
        more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
        sizes = ", ".join(f"{k}={getattr(config, k)}" for k in ("src_vocab_size", "d_model", "d_ff"))
        raise CheckpointError(f"checkpoint {path} does not agree with its own config ({sizes}): "
                              f"{'; '.join(wrong[:3])}{more}")


#: Config fields a checkpoint's weights do not depend on: a model may load them with other values.
WEIGHTLESS = ("dropout", "inner_dropout")


def check_compatible(checkpoint: dict[str, Any], config: TransformerConfig, path: str | Path = "") -> None:
    """Raise :class:`CheckpointError` unless the checkpoint was written for a model of ``config``.

    Dropout may differ (:data:`WEIGHTLESS`); every size must match.
    """
    theirs = TransformerConfig.from_dict(checkpoint["config"]).to_dict()
    ours = config.to_dict()
    differ = [k for k in ours if k not in WEIGHTLESS and ours[k] != theirs.get(k)]
    if differ:
        written = ", ".join(f"{k}={theirs.get(k)}" for k in differ)
        current = ", ".join(f"{k}={ours[k]}" for k in differ)
        raise CheckpointError(
            f"checkpoint {path} was written for a model with {written}, but this model has {current}"
        )


#: Options that decide a run's data and vocabulary: a checkpoint resumed in a run folder must share them with the run.
RUN_DATA_OPTIONS = ("dataset", "src_locale", "tgt_locale", "src_lang", "tgt_lang")


def check_same_run(checkpoint: dict[str, Any], path: str | Path) -> None:
    """Raise :class:`CheckpointError` unless the checkpoint belongs to the run recorded beside it."""
    from .runlog import read_log

    log = Path(path).parent / "log.jsonl"
    try:
        setups = [r for r in read_log(log) if r.get("event") == "setup"] if log.is_file() else []
        run = setups[-1] if setups else None
        ours = TransformerConfig.from_dict(run["config"]).to_dict() if run else None
    except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        return  # an unreadable log describes no run: the checkpoint itself has been checked
    if run is None or ours is None:
        return
    theirs = TransformerConfig.from_dict(checkpoint["config"]).to_dict()
    sizes = [k for k in ours if k not in WEIGHTLESS and ours[k] != theirs.get(k)]
    run_options, options = run.get("options") or {}, checkpoint.get("options") or {}
    data = [k for k in RUN_DATA_OPTIONS if k in run_options and k in options and run_options[k] != options[k]]
    if not sizes and not data:
        return
    written = ", ".join([f"{k}={theirs.get(k)}" for k in sizes] + [f"{k}={options[k]!r}" for k in data])
    recorded = ", ".join([f"{k}={ours[k]}" for k in sizes] + [f"{k}={run_options[k]!r}" for k in data])
    raise CheckpointError(
        f"checkpoint {path} does not belong to the run in {log.parent}: it was written for {written}, but that "
        f"run (its log.jsonl) has {recorded}; move the checkpoint out of the folder (to continue it, give "
        "--resume FILE and a new --out)")


def load_model(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[Transformer, SharedTokenizer, dict[str, Any]]:
    """Rebuild the trained model and its tokenizer from a checkpoint, in eval mode."""
    if Path(path).is_dir() and (Path(path) / BEST).is_file():
        path = Path(path) / BEST
    checkpoint = load_checkpoint(path)
    config = TransformerConfig.from_dict(checkpoint["config"])
    model = Transformer(config)
    load_model_state(model, checkpoint, path)
    tokenizer = checkpoint_tokenizer(checkpoint, path)
    if tokenizer.vocab_size != config.tgt_vocab_size:
        raise CheckpointError(
            f"checkpoint {path} holds a tokenizer of {tokenizer.vocab_size} tokens but a model "
            f"for {config.tgt_vocab_size}: it was not written by minitransformer's training"
        )
    return model.to(device).eval(), tokenizer, checkpoint


def chosen_alpha(options: dict[str, Any] | None) -> float:
    """The length penalty of beam search a run chose (its options' ``beam_alpha``), else the paper's 0.6
    (runs from before the option)."""
    chosen = (options or {}).get("beam_alpha")
    return 0.6 if chosen is None else chosen


def load_model_state(model: nn.Module, checkpoint: dict[str, Any], path: str | Path = "") -> None:
    """Load the checkpoint's weights into ``model`` after checking that the configs agree."""
    if isinstance(model, Transformer):
        check_compatible(checkpoint, model.config, path)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError as error:
        raise CheckpointError(f"checkpoint {path} does not fit this model: {error}") from error


# --- averaging ----------------------------------------------------------------
def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Average the model weights of several checkpoints of one run (paper, section 6.1).

    Every floating-point tensor of the model becomes the mean of its k values (computed in
    float64); the rest of the checkpoint (config, tokenizer, step, ...) is the last file's.
    The result holds no optimizer or scheduler: it is for translating, not for resuming.
    """
    if len(paths) < 1:
        raise ValueError("expected at least one checkpoint to average, got none")
    first = load_checkpoint(paths[0])
    config = TransformerConfig.from_dict(first["config"])
    # copy=True: tied weights share storage, and an in-place sum must not add into the others.
    sums = {k: v.to(torch.float64, copy=True) if v.is_floating_point() else v for k, v in first["model"].items()}
    last = first
    for path in paths[1:]:
        last = load_checkpoint(path)
        check_compatible(last, config, path)
        if last["tokenizer"] != first["tokenizer"]:
            raise CheckpointError(
                f"checkpoint {path} was trained with another tokenizer than {paths[0]}: only "
                "checkpoints of the same run can be averaged"
            )
        for k, v in last["model"].items():
            if v.is_floating_point():
                sums[k] += v.double()
    reference = last["model"]
    model = {k: (v / len(paths)).to(reference[k].dtype) if v.is_floating_point() else reference[k]
             for k, v in sums.items()}
    averaged = {k: v for k, v in last.items() if k not in ("optimizer", "scheduler")}
    averaged["model"] = model
    averaged["averaged_from"] = [str(p) for p in paths]
    return averaged


def check_average_target(path: str | Path, force: bool = False) -> Path:
    """Make sure an averaged checkpoint may be written to ``path`` (``average --out``).

    Never a training checkpoint of a run (``checkpoint-<step>.pt``, ``best.pt``, or any file
    holding optimizer state): replacing one would stop ``--resume`` working. Never a folder.
    An existing file only with ``force``.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"--out {path} is a folder; give a file name, e.g. {path / 'averaged.pt'}")
    if CHECKPOINT_PATTERN.match(path.name) or path.name == BEST:
        raise FileExistsError(f"--out {path} is named like a training checkpoint of a run ({path.name}); "
                              "choose another name, e.g. averaged.pt")
    if path.exists():
        if _holds_training_state(path):
            raise FileExistsError(f"--out {path} is a training checkpoint (it holds optimizer state): averaging "
                                  "into it would stop --resume working; choose another file")
        if not force:
            raise FileExistsError(f"--out {path} exists; pass --force to replace it, or choose another file")
    return path


def _holds_training_state(path: Path) -> bool:
    try:
        content = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # not a torch file (or damaged): not a checkpoint either
        return False
    return isinstance(content, dict) and "optimizer" in content
