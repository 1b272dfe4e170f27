"""notebooks/rise.css: the lessons' slideshows hide the notebook's "Click to add a cell." footer.

jupyterlab-rise loads ``rise.css`` from the folder of the notebook it shows; the test checks that the
installed jupyterlab-rise still does (its bundle names the file), so the stylesheet is not silently ignored.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_lessons_rise_css_hides_the_add_a_cell_footer() -> None:
    css = (ROOT / "notebooks" / "rise.css").read_text(encoding="utf-8")
    rule = re.search(r"\.jp-Notebook-footer\s*\{([^}]*)\}", css)
    assert rule and re.search(r"display:\s*none", rule.group(1)), css


def test_jupyterlab_rise_loads_rise_css_from_the_notebook_folder() -> None:
    rise = pytest.importorskip("jupyterlab_rise", reason="jupyterlab-rise is not installed (the notebooks extra)")
    bundles = list((Path(rise.__file__).parent / "static").glob("*.js"))
    assert bundles, "jupyterlab_rise ships no static bundle"
    assert any('"rise.css"' in path.read_text(encoding="utf-8", errors="replace") for path in bundles), \
        "this jupyterlab-rise no longer loads rise.css from the notebook's folder"
