"""Shared fixtures: every test runs on the CPU from a fixed seed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from minitransformer import set_seed

REPO_ROOT = Path(__file__).resolve().parents[1]
# Reference data beside the checkout (never committed): ../shared/data
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _seed() -> None:
    set_seed(0)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
