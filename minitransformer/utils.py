"""Device choice and reproducibility (the two helpers every lesson starts with), and safe file writing."""

from __future__ import annotations

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

    ``write`` fills a temporary file in the same folder; after it is flushed to disk,
    ``check`` (if given) may inspect it and raise to refuse it; only then does ``os.replace``
    rename it over ``path``, in one step. An error or Ctrl-C at any point leaves the old
    file (if any) untouched and removes the temporary one.

    Args:
        path: the file to write; its folder is created if needed.
        write: called with the open binary file.
        check: called with the temporary file's path before it is renamed.

    Returns:
        ``path`` as a Path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
