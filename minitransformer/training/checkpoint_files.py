"""Where a run's checkpoints are: ``checkpoint-<step>.pt`` (8 digits, so names sort by step), ``best.pt``,
the newest, and the one a resume continues from.
"""

from __future__ import annotations

import re
from pathlib import Path

BEST = "best.pt"  # the run's model: the best validation check, or the final weights of a decay to zero
#: Where ``--overwrite`` keeps the earlier run's files until the new run has written a checkpoint.
REPLACED_RUN = ".replaced-run"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)\.pt$")


def checkpoint_path(folder: str | Path, step: int) -> Path:
    """Where the checkpoint of optimizer step ``step`` goes: ``folder/checkpoint-00001234.pt``."""
    return Path(folder) / f"checkpoint-{step:08d}.pt"


def list_checkpoints(folder: str | Path) -> list[Path]:
    """The checkpoints of a run folder, oldest (lowest step) first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := CHECKPOINT_PATTERN.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(path: str | Path) -> Path:
    """``path`` itself if it is a file, else the newest checkpoint in the folder ``path``."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():
        found = list_checkpoints(path)
        if not found:
            aside = list_checkpoints(path / REPLACED_RUN)
            where = (f" (the {len(aside)} checkpoint(s) of an earlier run are in {path / REPLACED_RUN}, set aside "
                     "by an --overwrite run that stopped before its first checkpoint; `train --resume` with this "
                     "folder puts them back and continues)") if aside else ""
            raise FileNotFoundError(f"the folder {path} holds no checkpoint-<step>.pt files{where}")
        return found[-1]
    raise FileNotFoundError(f"no checkpoint file or run folder at {path}")


def checkpoint_to_resume(place: str | Path) -> Path:
    """The checkpoint a ``--resume`` of ``place`` (a checkpoint file or a run folder) continues from.

    Like :func:`latest_checkpoint`, but a run folder whose checkpoints an interrupted
    ``--overwrite`` left in ``<folder>/.replaced-run`` gives the newest of those (the run puts
    them back before it starts).
    """
    path = Path(place)
    if path.is_dir() and not list_checkpoints(path) and list_checkpoints(path / REPLACED_RUN):
        return list_checkpoints(path / REPLACED_RUN)[-1]
    return latest_checkpoint(path)


def run_folder_of(checkpoint: str | Path) -> Path:
    """The run folder a checkpoint file belongs to (its folder; the run's for one in ``.replaced-run``)."""
    folder = Path(checkpoint).parent
    return folder.parent if folder.name == REPLACED_RUN else folder


def checkpoint_step(path: str | Path) -> int | None:
    """The step in a checkpoint's file name (``checkpoint-00000030.pt`` -> 30), or None."""
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else None
