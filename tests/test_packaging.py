"""What installing the project relies on: each extra of pyproject.toml works on its own, and the
license that pyproject.toml names is the file shipped with the package.

The site extra alone (``pip install -e ".[site]"``, docs/site.md) must build every
API page, including that of ``minitransformer.grading.nbgrader_plugin``, which imports nbgrader
(the ``nbgrader`` extra). Here a child process that cannot import nbgrader stages the API pages
with ``tools/build_site.py`` and runs Sphinx with the site's configuration on that module's page.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A child process in which ``import nbgrader`` fails as it does where the nbgrader extra is not
# installed. A finder in front of the others, not ``sys.modules["nbgrader"] = None``: autodoc's
# mock (site/conf.py, autodoc_mock_imports) puts its own finder in front of this one while it
# imports a module, which a None in sys.modules would defeat.
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

STAGE_AND_BUILD = textwrap.dedent("""
    import importlib.util
    from pathlib import Path

    root, work = Path(sys.argv[1]), Path(sys.argv[2])
    spec = importlib.util.spec_from_file_location("build_site", root / "tools" / "build_site.py")
    build_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    build_site.SRC = work / "src"  # staged here, not in the checkout's site/_build
    build_site.stage(build_site.Stage(), solutions=False)
    page = "minitransformer.grading.nbgrader_plugin"
    staged = (build_site.SRC / "api" / f"{page}.md").read_text()
    assert f".. automodule:: {page}" in staged, staged

    # Sphinx with the site's conf.py on that page alone (the whole site takes a minute).
    source = work / "one"
    (source / "api").mkdir(parents=True)
    (source / "api" / f"{page}.md").write_text(staged)
    (source / "index.md").write_text(f"# API\\n\\n```{{toctree}}\\napi/{page}\\n```\\n")
    from sphinx.cmd.build import build_main

    code = build_main(["-b", "html", "-q", "-c", str(root / "site"), "-d", str(work / "doctrees"),
                       "-w", str(work / "warnings.txt"), str(source), str(work / "html")])
    print("sphinx exit", code)
    print("warnings:", (work / "warnings.txt").read_text())
    print((work / "html" / "api" / f"{page}.html").read_text())
""")


@pytest.mark.extra("site")
def test_the_site_extra_alone_builds_the_api_pages(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", WITHOUT_NBGRADER + STAGE_AND_BUILD, str(ROOT), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "sphinx exit 0" in out, out[-3000:]
    warnings = out.split("warnings:", 1)[1].split("<!DOCTYPE", 1)[0]
    assert "failed to import" not in warnings and "nbgrader" not in warnings, warnings
    # autodoc read the module (with nbgrader mocked): its class and function are documented.
    assert 'id="minitransformer.grading.nbgrader_plugin.ClearSolutionsWithHints"' in out
    assert 'id="minitransformer.grading.nbgrader_plugin.configure"' in out


def test_the_child_process_cannot_import_nbgrader() -> None:
    # The check above means something only if nbgrader is really out of reach there.
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
    # The README's install has no nbgrader: every module must still import, and the plug-in says what to install.
    script = WITHOUT_NBGRADER + textwrap.dedent("""
        import importlib, pkgutil
        import minitransformer
        for info in pkgutil.walk_packages(minitransformer.__path__, prefix="minitransformer."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        from minitransformer.grading.nbgrader_plugin import ClearSolutionsWithHints
        try:
            ClearSolutionsWithHints()
        except ModuleNotFoundError as err:
            print("MESSAGE", err)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "needs nbgrader" in done.stdout and "pip install 'minitransformer[nbgrader]'" in done.stdout, done.stdout
