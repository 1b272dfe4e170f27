"""Device choice and reproducibility: the two helpers every lesson starts with."""

from __future__ import annotations

import os
import random

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
