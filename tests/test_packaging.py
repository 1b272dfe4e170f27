"""What installing the project relies on: the learner's package works without the instructor's extras, and
the license that pyproject.toml names is the file shipped with the package.

nbgrader belongs to the grader (``grader/``, its own distribution and its ``nbgrader`` extra): no module of
``minitransformer`` may need it. A child process that cannot import nbgrader imports every module.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A child process in which ``import nbgrader`` fails as it does where nbgrader is not installed: a
# finder in front of the others (grader/tests/test_grading.py uses the same one for the plug-in).
WITHOUT_NBGRADER = textwrap.dedent("""
    import importlib.abc
    import sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "nbgrader" or name.startswith("nbgrader."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Absent())
    try:
        import nbgrader  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit("the child process could still import nbgrader")
""")


def test_the_child_process_cannot_import_nbgrader() -> None:
    # The check below means something only if nbgrader is really out of reach there.
    done = subprocess.run([sys.executable, "-c", WITHOUT_NBGRADER + "import nbgrader.preprocessors\n"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "No module named 'nbgrader" in done.stderr, done.stderr


def test_the_license_is_the_file_that_pyproject_names() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]  # tomllib is Python 3.11+
    assert re.search(r'^license = "MIT"$', project, re.MULTILINE), "expected an SPDX expression (PEP 639)"
    assert re.search(r'^license-files = \["LICENSE"\]$', project, re.MULTILINE)
    minimum = re.search(r'"setuptools>=(\d+)', pyproject)
    assert minimum and int(minimum.group(1)) >= 77, "setuptools reads license-files from version 77"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the minitransformer authors" in text
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text


def test_docstring_literals_are_escaped_whole_for_the_site() -> None:
    # The site's docstring hook once matched the text *between* two literals ("`` or raises an ``") and
    # put a stray backslash in front of the second one: "raises an `\ AssertionError`".
    import runpy

    conf = runpy.run_path(str(ROOT / "site" / "conf.py"))
    lines = ["``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says", "``<pad>``=0, ``x``.", "|Y| ``a``b"]
    conf["_escape_docstring"](None, "module", "m", None, {}, lines)
    assert lines == ["``✓ Task 2 passed: ...`` or raises an ``AssertionError`` that says",
                     "``<pad>``\\ =0, ``x``.", "\\|Y\\| ``a``\\ b"]


def test_every_module_imports_without_the_optional_extras() -> None:
    # The README's install has no nbgrader: every module of the learner's package imports without it.
    script = WITHOUT_NBGRADER + textwrap.dedent("""
        import importlib, pkgutil
        import minitransformer
        for info in pkgutil.walk_packages(minitransformer.__path__, prefix="minitransformer."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        print("IMPORTED", len(sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "IMPORTED" in done.stdout and "nbgrader" not in done.stdout, done.stdout
