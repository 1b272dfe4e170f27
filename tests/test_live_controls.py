"""Issue 30: a live control in the lessons, each with its static pictures and an open question.

The stored notebooks are read, not run: a lesson's "Try it" section must hold the pictures of the view
(an image from ``static_panels``), the control itself (an ipywidgets view, its state saved in the
notebook) and a question the learner answers by moving it. The functions behind the controls are
tested in tests/test_playground.py; the site's pages replace a control by a line saying where to move it.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = runpy.run_path(str(ROOT / "tools" / "lesson_plan.py"))["LESSONS"]  # NN_name and NNb_name (issue 44)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _try_it(path: Path) -> tuple[dict, list[dict]] | None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    start = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and "".join(c["source"]).startswith("## Try it")), None)
    if start is None:
        return None
    end = next((j for j in range(start + 1, len(cells)) if cells[j]["cell_type"] == "markdown"), len(cells))
    return notebook, cells[start:end]


def _with_controls() -> list[Path]:
    return [p for p in LESSONS if _try_it(p) is not None]


def test_at_least_eight_lessons_have_a_live_control():
    assert len(_with_controls()) >= 8, [p.name for p in _with_controls()]


@pytest.mark.parametrize("path", _with_controls(), ids=lambda p: p.name)
def test_the_control_is_stored_with_its_pictures_and_a_question(path: Path):
    notebook, section = _try_it(path)
    text = "".join(section[0]["source"])
    assert "**Your question:**" in text, f"{path.name}: the 'Try it' section should end with a question"
    code = [c for c in section if c["cell_type"] == "code"]
    assert "static_panels(" in "".join(code[0]["source"]), f"{path.name}: the pictures come first"
    assert any("image/png" in o.get("data", {}) for o in code[0]["outputs"]), (
        f"{path.name}: no stored picture of the view (execute the notebook)")
    live = [c for c in code if "live(" in "".join(c["source"])]
    assert live, f"{path.name}: no live(...) control"
    views = [o["data"][WIDGET_VIEW]["model_id"] for c in live for o in c["outputs"] if WIDGET_VIEW in o.get("data", {})]
    assert views, f"{path.name}: the control's view is not in the stored outputs (execute the notebook)"
    state = notebook["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert all(v in state for v in views), f"{path.name}: the widgets' state is not saved in the notebook"
    assert all(c["metadata"]["slideshow"]["slide_type"] == "skip" for c in live), (
        f"{path.name}: the slides cannot load the widget manager: a control's cell is of slide type 'skip'")


def test_a_page_of_the_site_says_where_the_control_is():
    build = runpy.run_path(str(ROOT / "tools" / "build_site.py"))
    widget = {"output_type": "display_data", "metadata": {},
              "data": {WIDGET_VIEW: {"model_id": "abc", "version_major": 2, "version_minor": 0}, "text/plain": "VBox()"}}
    picture = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR"}}
    notebook = {"metadata": {"widgets": {WIDGET_STATE: {"state": {}}}}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Lesson"},
        {"cell_type": "code", "metadata": {}, "source": "static_panels(...)", "outputs": [picture]},
        {"cell_type": "code", "metadata": {}, "source": "live(...)", "outputs": [widget]}]}
    page = build["web_notebook"](notebook, {"cell_type": "markdown", "metadata": {}, "source": "links"})
    outputs = [c.get("outputs") for c in page["cells"]]
    assert outputs[2] == [picture]
    assert "open the lesson in JupyterLab" in outputs[3][0]["data"]["text/plain"]
    assert "widgets" not in page["metadata"]
