"""Reading the GPU profile's result files (``python -m benchmarks.gpu_profile``): a table and a figure (lesson 08b).

Every figure shown comes from the file; nothing is typed in by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

#: Version of the layout written by ``benchmarks/gpu_profile.py``.
SCHEMA = 1
_REQUIRED = ("schema", "device", "run", "model", "training", "quality", "comparison", "loss_curve")


def result_path(folder: str | Path, device_name: str) -> Path:
    """``folder/<device name as a file name>.json``, e.g. ``nvidia-h100-80gb-hbm3.json``."""
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "device"
    return Path(folder) / f"{slug}.json"


def find_results(folder: str | Path) -> list[Path]:
    """The GPU profile results in ``folder``, sorted by name; empty when there are none (or no folder).

    Other JSON files in the folder (results of other benchmarks) are left out: a result is a JSON
    object holding every top-level key that :func:`load_result` requires.
    """
    folder = Path(folder)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(content, dict) and all(key in content for key in _REQUIRED):
            found.append(path)
    return found


def load_result(path: str | Path) -> dict[str, Any]:
    """Read one result file and check that it has the expected layout."""
    result = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [key for key in _REQUIRED if key not in result]
    if missing:
        raise ValueError(f"{path} is not a GPU profile result: it lacks {', '.join(missing)}")
    if result["schema"] != SCHEMA:
        raise ValueError(f"{path} has layout version {result['schema']}, this code reads version {SCHEMA}")
    return result


def _number(value: float | None, pattern: str, unknown: str) -> str:
    return unknown if value is None else format(value, pattern)


def _ratio(comparison: dict[str, Any] | None) -> str:
    return "not measured" if not comparison else f"{comparison['ratio']:.2f}x"


def result_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline figures of a result as (what, value) rows, formatted for reading."""
    device, run, model, training = result["device"], result["run"], result["model"], result["training"]
    quality, comparison = result["quality"], result["comparison"]
    peak = device.get("peak_bf16_tflops")
    mfu = training.get("mfu")
    memory = training.get("peak_memory_bytes")
    name = "BLEU" if quality["metric"] == "bleu" else "exact match %"
    return [
        ("device", device["name"]),
        ("date", run["date"]),
        ("command", run["command"]),
        ("model", f"{model['preset']}: {model['layers']}+{model['layers']} layers, d_model {model['d_model']}, "
                  f"{model['parameters'] / 1e6:.1f}M parameters"),
        ("precision", ("bf16 autocast" if training["bf16"] else "fp32")
         + (", torch.compile" if training["compiled"] else "") + (", fused Adam" if training["fused_adam"] else "")),
        ("wall time", f"{run['wall_seconds'] / 60:.1f} min ({training['train_seconds'] / 60:.1f} min in the "
                      f"training run, {training['steps']:,} steps)"),
        ("tokens per second", f"{training['tokens_per_s']:,.0f} (target tokens: {training['tgt_tokens_per_s']:,.0f})"),
        ("MFU", "unknown (no peak for this device)" if mfu is None else
         f"{100 * mfu:.1f}% of {peak:.0f} TFLOP/s dense bf16"),
        ("ours / nn.Transformer, compiled", _ratio(comparison.get("compiled"))),
        ("ours / nn.Transformer, eager", _ratio(comparison.get("eager"))),
        (f"{name} on {quality['split']}, greedy", f"{quality['greedy']:.2f}"),
        (f"{name} on {quality['split']}, beam 4", _number(quality.get("beam4"), ".2f", "not measured")),
        (f"{name} computed as", quality["signature"]),
        ("peak memory", "not measured" if memory is None else f"{memory / 2**30:.2f} GiB"),
    ]


def format_result_table(result: dict[str, Any]) -> str:
    """The rows of :func:`result_rows` as an aligned two-column text table."""
    rows = result_rows(result)
    width = max(len(what) for what, _ in rows)
    return "\n".join(f"{what:<{width}}  {value}" for what, value in rows)


def plot_result(result: dict[str, Any]) -> Any:
    """Draw a result: the run's loss curves, and tokens per second of ours and of nn.Transformer."""
    import matplotlib.pyplot as plt

    from .plotting import plot_loss_curve

    curve = result["loss_curve"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    plot_loss_curve(curve["steps"], curve["train_loss"], curve["val_steps"], curve["val_loss"], ax=left,
                    title=f"{result['model']['preset']} model on {result['training']['dataset']}")
    modes = [m for m in ("eager", "compiled") if result["comparison"].get(m)]
    for k, (name, label) in enumerate((("ours", "minitransformer"), ("torch", "nn.Transformer"))):
        values = [result["comparison"][m][name]["tokens_per_s"] for m in modes]
        bars = right.bar([i + 0.4 * k for i in range(len(modes))], values, width=0.38, label=label)
        right.bar_label(bars, labels=[f"{v:,.0f}" for v in values])
    right.set_xticks([i + 0.2 for i in range(len(modes))], modes)
    right.set_ylabel("tokens per second (source + target)")
    right.set_title(f"training step on {result['device']['name']}")
    right.legend(loc="lower right")
    return figure
