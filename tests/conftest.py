"""Shared fixtures: every test runs on the CPU from a fixed seed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from minitransformer import set_seed

REPO_ROOT = Path(__file__).resolve().parents[1]
# Reference data beside the checkout (never committed): ../shared/data
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


# Several pytest-xdist workers share the cores: one thread each avoids oversubscription,
# which slows small CPU models down by an order of magnitude.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed() -> None:
    set_seed(0)
