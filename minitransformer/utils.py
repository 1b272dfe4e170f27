"""Device choice and reproducibility (the two helpers every lesson starts with), argument checks, and safe
file writing."""

from __future__ import annotations

import errno
import math
import os
import random
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np
import torch


def get_device(prefer: str | None = None) -> torch.device:
    """Pick the fastest available device: CUDA, then Apple's MPS, then the CPU."""
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
    """Seed Python's, NumPy's and PyTorch's (CPU and all GPUs) random generators."""
    check_seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


#: Largest seed PyTorch's generator takes, plus one.
SEED_LIMIT = 2**64


def check_seed(seed: object, name: str = "seed") -> int:
    """``seed`` itself if it is an int in [0, 2**64), else one clear error naming ``name``."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{name} must be an integer, got {type(seed).__name__} {seed!r}")
    if not 0 <= seed < SEED_LIMIT:
        shown = f"{seed}" if len(str(seed)) <= 30 else f"a {len(str(abs(seed)))}-digit number"
        raise ValueError(f"{name} must be an integer in [0, 2**64) (PyTorch's generator holds 64 bits), got {shown}")
    return seed


def check_int(value: object, name: str, low: int, *, below: int | None = None, at_most: int | None = None,
              why: str = "") -> int:
    """``value`` itself if it is an int from ``low`` on, under ``below`` or up to ``at_most``, else one clear error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if below is not None and not low <= value < below:
        raise ValueError(f"{name} must be in [{low}, {below}){why}, got {value}")
    if at_most is not None and not low <= value <= at_most:
        raise ValueError(f"{name} must be in [{low}, {at_most}]{why}, got {value}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}{why}, got {value}")
    return value


def check_number(value: object, name: str, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, why: str = "") -> float:
    """``value`` as a float inside the given bounds (closed unless ``*_open``), else one clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        left = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
        right = "" if high is None else f"{high:g}" + (")" if high_open else "]")
        interval = f"in {left or '(-inf'}, {right or 'inf)'}"
        raise ValueError(f"{name} must be {interval}{why}, got {value}")
    return float(value)


def check_even(value: object, name: str) -> int:
    """A positive even int (the sine and cosine columns of a positional table pair up), else one clear error."""
    check_int(value, name, 2)
    if value % 2:  # type: ignore[operator]
        raise ValueError(f"{name} must be a positive even integer (sine and cosine columns pair up), got {value}")
    return value  # type: ignore[return-value]


def check_memory(nbytes: float, what: str, device: torch.device | str | None = None) -> None:
    """Refuse, with one line, an allocation larger than the device's whole memory."""
    device = torch.device(device if device is not None else "cpu")
    total = _memory_of(device)
    if total is not None and nbytes > total:
        raise MemoryError(f"{what} would need {_gib(nbytes)} of memory for this alone, more than the "
                          f"{_gib(total)} this {device.type.upper()} has; choose a smaller value")


def _memory_of(device: torch.device) -> int | None:
    """Total memory of a device in bytes (None when it cannot be told)."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError, RuntimeError, AssertionError):
        return None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:,.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


def _disk_full(error: BaseException, folder: Path) -> int | None:
    """The errno of a full disk behind ``error``, or None.

    PyTorch's serializer reports a full disk as ``RuntimeError("[enforce fail at
    inline_container.cc...] unexpected pos ...")`` with the OSError as its context; where
    the context is lost, a serializer error in a folder with (almost) no free space counts too.
    """
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in _FULL:
            return seen.errno
        seen = seen.__cause__ or seen.__context__
    if isinstance(error, RuntimeError) and ("inline_container" in str(error) or "write failed" in str(error)):
        try:
            space = os.statvfs(folder)
        except (AttributeError, OSError):
            return None
        if space.f_bavail * space.f_frsize < 2**20:
            return errno.ENOSPC
    return None


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None],
                 check: Callable[[Path], None] | None = None) -> Path:
    """Write a file so that it is either complete or absent, never half-written.

    ``write`` fills a temporary file (``.<name>.<random>.part``) in the same folder; after it
    is flushed to disk, ``check`` (if given) may inspect it and raise to refuse it; only then
    does ``os.replace`` rename it over ``path``, in one step. An error or Ctrl-C at any point
    leaves the old file (if any) untouched and removes the temporary one.
    """
    path = Path(path)
    writable_folder(path.parent, f"the folder of {path.name}")
    try:
        # The mode a plain open() would give (mkstemp's is 0600), or that of the file replaced.
        mode = path.stat().st_mode & 0o777 if path.is_file() else 0o666 & ~_umask()
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {_reason(error, path.parent)}", error.errno) from error
    try:
        if hasattr(os, "fchmod"):  # not on Windows before Python 3.13
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    except (OSError, RuntimeError) as error:
        # torch.save reports a full disk as RuntimeError("... unexpected pos ..."), the OSError as its context.
        code = _disk_full(error, path.parent)
        if code is None:
            raise
        kept = f"; the previous {path.name} is unchanged" if path.exists() else ""
        raise OutputError(f"disk full while writing {path} ({os.strerror(code)}): the partial file "
                          f"{Path(tmp).name} was removed{kept}; free some space and try again",
                          code) from error
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
    """Create ``folder`` if needed and make sure files can be written in it."""
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
