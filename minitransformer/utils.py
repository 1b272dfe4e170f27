"""Device choice and reproducibility (the two helpers every lesson starts with), and safe file writing."""

from __future__ import annotations

import errno
import os
import random
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np
import torch


def get_device(prefer: str | None = None) -> torch.device:
    """Pick the fastest available device: CUDA, then Apple's MPS, then the CPU.

    Args:
        prefer: a device string ("cpu", "cuda", "cuda:1", "mps") to use instead of
            the automatic choice; an unavailable one is an error.

    Returns:
        The chosen ``torch.device``.
    """
    if prefer is not None and prefer != "auto":
        device = torch.device(prefer)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {prefer!r} was asked for, but CUDA is not available on this machine")
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(f"device {prefer!r} was asked for, but MPS is not available on this machine")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and PyTorch's (CPU and all GPUs) random generators.

    Args:
        seed: any non-negative integer.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None],
                 check: Callable[[Path], None] | None = None) -> Path:
    """Write a file so that it is either complete or absent, never half-written.

    ``write`` fills a temporary file (``.<name>.<random>.part``) in the same folder; after it
    is flushed to disk, ``check`` (if given) may inspect it and raise to refuse it; only then
    does ``os.replace`` rename it over ``path``, in one step. An error or Ctrl-C at any point
    leaves the old file (if any) untouched and removes the temporary one.

    Args:
        path: the file to write; its folder is created if needed.
        write: called with the open binary file.
        check: called with the temporary file's path before it is renamed.

    Returns:
        ``path`` as a Path.

    Raises:
        OutputError: the folder cannot be created or written, or the disk is full.
    """
    path = Path(path)
    writable_folder(path.parent, f"the folder of {path.name}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {_reason(error, path.parent)}", error.errno) from error
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    except OSError as error:
        if error.errno not in _FULL:
            raise
        kept = f"; the previous {path.name} is unchanged" if path.exists() else ""
        raise OutputError(f"disk full while writing {path} ({os.strerror(error.errno)}): the partial file "
                          f"{Path(tmp).name} was removed{kept}; free some space and try again",
                          error.errno) from error
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


class OutputError(OSError):
    """A file or folder that cannot be written: a full disk, a read-only place, a file in the way.

    ``str(error)`` is one sentence that names the path; ``errno`` is the system's code (or None).
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}  # no space left, quota exceeded


def _reason(error: OSError, folder: Path) -> str:
    """The cause of a failed write, in a user's words."""
    if error.errno == errno.EROFS:
        return f"{folder} is on a read-only file system"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in {folder}"
    if error.errno in _FULL:
        return "the disk is full"
    if error.errno in (errno.ENOTDIR, errno.EEXIST):
        blocking = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), folder)
        return f"{blocking} is a file, not a folder"
    return error.strerror or str(error)


def writable_folder(folder: str | Path, what: str = "folder") -> Path:
    """Create ``folder`` if needed and make sure files can be written in it.

    Args:
        folder: the folder.
        what: how the user knows it ("--out folder"), for the message.

    Returns:
        ``folder`` as a Path.

    Raises:
        OutputError: one line saying why not (a file in the way, read-only, no permission, disk full).
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot use {what} {folder}: {_reason(error, folder)}", error.errno) from error
    if not os.access(folder, os.W_OK):
        code = errno.EROFS if _read_only(folder) else errno.EACCES
        raise OutputError(f"cannot use {what} {folder}: {_reason(OSError(code, ''), folder)}", code)
    return folder


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # no statvfs on Windows
        return False
