"""The run's JSON lines log: one record per event ("setup", "train", "epoch", "checkpoint", "interrupted", "test").

Each record is one ``write``, so a crash cuts off at most the last line; :func:`trim_log` repairs that, and
drops the records a resumed checkpoint does not contain, before a resumed run appends.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from ..utils import atomic_write


class RunLog:
    """Appends records to ``path``; inactive (writes nothing) when ``enabled`` is False.

    Nothing touches the file before the first record: a run refused while it is being set
    up (too slow for a CPU, no data) leaves no empty log behind.
    """

    def __init__(self, path: str | Path, enabled: bool = True, fresh: bool = True) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self._fresh = fresh

    def write(self, event: str, **fields: Any) -> None:
        """Append one record ``{"event": event, "time": ..., **fields}``."""
        if not self.enabled:
            return
        record = {"event": event, "time": round(time.time(), 3)}
        record.update({k: _plain(v) for k, v in fields.items()})
        if self._fresh:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w" if self._fresh else "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._fresh = False


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN or infinity
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """All records of a JSON lines log, in order (a cut-off last line is skipped)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def trim_log(path: str | Path, step: int | None = None) -> list[str]:
    """Make a run's log ready for a resumed run to append to.

    A cut-off last line (the process died while writing it) is dropped: the next record
    would otherwise be glued to it and lost too. With ``step``, records of later steps are
    dropped as well: that work was lost with the process and the resumed run does it again.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_bytes().split(b"\n")
    notes = []
    tail = lines.pop()  # whatever follows the last newline: empty for a complete file
    if tail:
        notes.append(f"{path}: dropped a cut-off last line of {len(tail)} bytes (the run stopped while writing it)")
    kept = lines
    if step is not None:
        kept = [line for line in lines if not _after(line, step)]
        if len(kept) < len(lines):
            notes.append(f"{path}: dropped {len(lines) - len(kept)} records of steps after {step}, the step "
                         "resumed from (they are done again)")
    if notes:
        atomic_write(path, lambda handle: handle.write(b"".join(line + b"\n" for line in kept)))
    return notes


def has_records_after(path: str | Path, step: int) -> bool:
    """True when the log at ``path`` holds records of steps after ``step`` (a resume from ``step`` drops them)."""
    path = Path(path)
    return path.is_file() and any(_after(line, step) for line in path.read_bytes().split(b"\n"))


def _after(line: bytes, step: int) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] > step


def loss_curves(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Training and validation losses by step, from log records (a resumed run's repeats use the latest)."""
    train: dict[int, float] = {}
    val: dict[int, float] = {}
    for r in records:
        if r.get("event") == "train" and isinstance(r.get("loss"), (int, float)):
            train[r["step"]] = r["loss"]
        elif r.get("event") in ("epoch", "validation") and isinstance(r.get("val_loss"), (int, float)):
            val[r["step"]] = r["val_loss"]
    steps, vsteps = sorted(train), sorted(val)
    return {"steps": steps, "train_loss": [train[s] for s in steps],
            "val_steps": vsteps, "val_loss": [val[s] for s in vsteps]}
