"""Shared fixtures of the grader's tests: every test runs on the CPU from a fixed seed.

The tests that need nbgrader are marked ``@pytest.mark.extra("nbgrader")`` and skip without it (the
grader's ``nbgrader`` extra: ``pip install -e "grader[nbgrader]"``); with
MINITRANSFORMER_REQUIRE_EXTRAS=nbgrader (CI) a missing nbgrader fails instead. The others need
bubblewrap, which the grader itself asks for (CI installs it).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from minitransformer import set_seed

# Several pytest-xdist workers share the cores: one thread each avoids oversubscription.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

EXTRAS = {"nbgrader": ("nbgrader",)}  # the grader's extras (grader/pyproject.toml) and the modules each brings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "extra(name): needs an optional extra of grader/pyproject.toml")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("extra"):
        name = mark.args[0]
        missing = [m for m in EXTRAS[name] if importlib.util.find_spec(m) is None]
        if not missing:
            continue
        message = f"needs the grader's {name} extra (pip install -e 'grader[{name}]'); missing: {', '.join(missing)}"
        if name in os.environ.get("MINITRANSFORMER_REQUIRE_EXTRAS", "").split(","):
            pytest.fail(message + " (MINITRANSFORMER_REQUIRE_EXTRAS asks for it)", pytrace=False)
        pytest.skip(message)


@pytest.fixture(autouse=True)
def _seed() -> None:
    set_seed(0)
