"""The folder a run writes into: what it may replace, and what it sets aside and puts back.

Nothing here deletes a checkpoint that a run could still need: ``--overwrite`` sets the earlier run aside
until the new one has a checkpoint; a resumed run moves later steps' files aside rather than deleting them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from .checkpoint import atomic_copy
from .checkpoint_files import (
    BEST,
    REPLACED_RUN,
    checkpoint_path,
    checkpoint_step,
    list_checkpoints,
    run_folder_of,
)
from .options import TrainOptions
from .runlock import LOCK_NAME
from .runlog import has_records_after, read_log

ASIDE = REPLACED_RUN
RUN_FILES = ("log.jsonl", "tokenizer.json", "loss.png", BEST)


def _other_files(out: Path) -> list[str]:
    """Names in ``out`` other than a run's own bookkeeping (lock, unfinished writes, files set aside)."""
    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir() if not (p.name == LOCK_NAME or p.name == ASIDE
                  or p.name.startswith(".after-step-") or (p.name.startswith(".") and p.name.endswith(".part"))))


def _shown(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _started_without_checkpoint(out: Path, files: list[str]) -> bool:
    """True when ``files`` are only what a run writes before its first checkpoint: a ``log.jsonl``
    that starts with the run's setup record and records no checkpoint, and ``tokenizer.json``."""
    if "log.jsonl" not in files or not set(files) <= {"log.jsonl", "tokenizer.json"}:
        return False
    try:
        records = read_log(out / "log.jsonl")
    except (OSError, UnicodeDecodeError):
        return False
    return (bool(records) and isinstance(records[0].get("options"), dict) and records[0].get("event") == "setup"
            and not any(r.get("event") in ("checkpoint", "done") for r in records))


def check_out_folder(options: TrainOptions, out: Path, resumed: Path | None) -> str | None:
    """Refuse to write where the run would change files that are not its own."""
    if resumed is not None:
        home = run_folder_of(resumed)
        if home.resolve() != out.resolve() and (files := _other_files(out)):
            raise FileExistsError(
                f"--resume {resumed} belongs to the run in {home}, but --out {out} holds other files "
                f"({_shown(files)}): a resume writes only into the run it resumes; leave out --out (the "
                "checkpoint's own folder is used), or give an empty --out to continue from this checkpoint "
                "in a new folder")
        return None
    if options.overwrite:
        return None
    earlier = list_checkpoints(out)
    if earlier:
        raise FileExistsError(
            f"{options.out} holds checkpoints of an earlier run (newest: {earlier[-1].name}); pass "
            "--resume to continue it, --overwrite to start afresh (replaces them once the new run has "
            "written its first checkpoint), or another --out"
        )
    files = _other_files(out)
    if files and _started_without_checkpoint(out, files):
        return (f"{out} holds only the {' and '.join(files)} of a run that stopped before its first checkpoint: "
                "nothing there to resume, so this run starts afresh and replaces them")
    if files:
        raise FileExistsError(
            f"--out {out} is not empty ({_shown(files)}) and holds no run (no checkpoint-<step>.pt): training "
            f"would write {', '.join(RUN_FILES)} there; pass --overwrite to let it (files of those names are "
            "replaced once the new run has written its first checkpoint), or choose an empty or new --out")
    return None


class EarlierRun:
    """The files of an earlier run that ``--overwrite`` replaces."""

    def __init__(self, out: Path) -> None:
        self.out, self.folder = out, out / ASIDE
        self.replacing = False  # files were set aside and the new run has no checkpoint yet

    def recover(self) -> str | None:
        if not self.folder.is_dir():
            return None
        if list_checkpoints(self.out):
            self.discard()  # the replacing run had written a checkpoint: the old files were no longer needed
            return None
        n = self.restore()
        return f"put back {n} files of an earlier run that an interrupted --overwrite run had set aside"

    def set_aside(self) -> int:
        files = [p for p in [*list_checkpoints(self.out), *(self.out / n for n in RUN_FILES)] if p.is_file()]
        if files:
            self.folder.mkdir(exist_ok=True)
            for path in files:
                os.replace(path, self.folder / path.name)
        return len(files)

    def restore(self) -> int:
        files = list(self.folder.iterdir())
        for path in files:
            os.replace(path, self.out / path.name)
        self.folder.rmdir()
        return len(files)

    def discard(self, _: object = None) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.replacing = False


def remove_partial_files(out: Path) -> str | None:
    """Delete the temporary ``.<name>.<random>.part`` files of writes cut short by a crash (we hold the lock)."""
    parts = [p for p in out.glob(".*.part") if p.is_file()]
    for part in parts:
        part.unlink(missing_ok=True)
    return f"removed {len(parts)} unfinished file(s) of an earlier write in {out}" if parts else None


def first_missing_folder(folder: Path) -> Path | None:
    """The outermost folder of ``folder``'s path that does not exist yet (None: it exists)."""
    missing = None
    for path in [folder, *folder.parents]:
        if path.exists():
            return missing
        missing = path
    return missing


def remove_empty_folders(folder: Path, up_to: Path) -> None:
    """Remove ``folder`` and its parents up to ``up_to`` while they are empty (a start that failed)."""
    for path in [folder, *folder.parents]:
        try:
            path.rmdir()  # only an empty folder goes
        except OSError:
            return
        if path == up_to:
            return


def what_was_saved(out: Path, step: int) -> str:
    """After a stop by a second Ctrl-C: which checkpoint holds the run now."""
    found = list_checkpoints(out)
    if not found:
        return f"interrupted at step {step}: no checkpoint was written"
    saved = checkpoint_step(found[-1]) or 0
    n = step - saved
    lost = "" if n <= 0 else f"; the {n} step{'s' if n > 1 else ''} after it {'were' if n > 1 else 'was'} not saved"
    return (f"interrupted at step {step}: the newest checkpoint is {found[-1]} (step {saved}){lost}; "
            "continue with --resume")


def _stored_step(path: Path) -> int | None:
    """The step inside a checkpoint file, or None when it is missing or unreadable."""
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["step"])
    except Exception:  # noqa: BLE001 - missing, damaged or foreign
        return None


def set_aside_later(out: Path, step: int) -> str | None:
    """Move what a run resumed from ``step`` replaces into ``<out>/.after-step-<step>/``."""
    later = [p for p in list_checkpoints(out) if (checkpoint_step(p) or 0) > step]
    if (best_step := _stored_step(out / BEST)) is not None and best_step > step:
        later.append(out / BEST)
    log = out / "log.jsonl"
    copies = [p for p in (log, out / "loss.png") if p.is_file()] if has_records_after(log, step) else []
    if not later and not copies:
        return None
    folder = out / f".after-step-{step:08d}"
    n = 1
    while folder.exists():  # resumed from this step before: keep that folder as it is
        n += 1
        folder = out / f".after-step-{step:08d}-{n}"
    folder.mkdir()
    for path in copies:
        atomic_copy(path, folder / path.name)
    for path in later:
        os.replace(path, folder / path.name)
    what = [f"{len(later)} file(s) of later steps"] if later else []
    what += [f"a copy of {' and '.join(p.name for p in copies)} (with the records of later steps)"] if copies else []
    return f"resuming from step {step}: moved {' and '.join(what)} to {folder}"


def restore_best(out: Path, resumed: Path, checkpoint: dict[str, Any]) -> str | None:
    """Copy the best checkpoint to ``best.pt`` again if ``best.pt`` does not hold it.

    A run killed while copying its best checkpoint leaves no (or an older) ``best.pt``.
    """
    best_step = checkpoint.get("metrics", {}).get("best_step")
    source = resumed if best_step == checkpoint["step"] else checkpoint_path(out, best_step or 0)
    best = out / BEST
    if best_step is None or not source.is_file() or _stored_step(best) == best_step:
        return None
    atomic_copy(source, best)
    return f"{best} did not hold the best checkpoint (step {best_step}): copied it again from {source.name}"
