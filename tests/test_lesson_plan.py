"""Lessons that fit a class: the main path's slides, the going-further sections, the "**Time:**" lines."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAN = runpy.run_path(str(ROOT / "tools" / "lesson_plan.py"))
LESSONS = PLAN["LESSONS"]


def test_there_are_lessons():
    assert len(LESSONS) == 11


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_the_main_path_fits_a_class(path: Path):
    plan = PLAN["plan"](path)
    assert plan.main_slides <= PLAN["MAX_MAIN_SLIDES"], (
        f"{path.name}: {plan.main_slides} slides on the main path, more than a 50-minute class holds "
        f"({PLAN['MAX_MAIN_SLIDES']}); mark a section 'going further' (docs/AUTHORING.md)")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_going_further_sections_are_marked_and_skipped_by_the_slides(path: Path):
    assert PLAN["structure_problems"](path) == []


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_the_time_line_is_written_from_the_notebook(path: Path):
    plan = PLAN["plan"](path)
    assert plan.ran_seconds is not None, f"{path.name}: no stored 'lesson ran in N s' (execute the notebook)"
    assert PLAN["write_time_line"](path, check=True), (
        f"{path.name}: its '**Time:**' line is out of date; run python tools/lesson_plan.py --write")


def _notebook(tmp_path: Path, cells: list[dict]) -> Path:
    path = tmp_path / "99_probe.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _md(source: str, slide: str = "-", further: bool = False) -> dict:
    meta = {"slideshow": {"slide_type": slide}}
    if further:
        meta["tags"] = ["going-further"]
    return {"cell_type": "markdown", "metadata": meta, "source": source}


def test_the_checks_can_fail(tmp_path: Path):
    good = [_md("# Lesson\n\n**Time:** stale", "slide"), _md("## Going further: x", "skip", True),
            _md("text", "skip", True), _md("## Next", "slide")]
    assert PLAN["structure_problems"](_notebook(tmp_path, good)) == []
    assert not PLAN["write_time_line"](_notebook(tmp_path, good), check=True)
    shown = [good[0], _md("## Going further: x", "skip", True), _md("text", "-", True), good[3]]
    assert "not 'skip'" in PLAN["structure_problems"](_notebook(tmp_path, shown))[0]
    untitled = [good[0], _md("## Aside", "skip", True), good[3]]
    assert "without a heading" in PLAN["structure_problems"](_notebook(tmp_path, untitled))[0]
    glued = [good[0], good[1], _md("more", "-")]
    assert "starts no slide" in PLAN["structure_problems"](_notebook(tmp_path, glued))[0]


def _outputs(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_lesson_07_summary_gives_the_padding_it_measured():
    lesson = ROOT / "notebooks" / "07_training.ipynb"
    prose = " ".join("".join(c["source"]) for c in json.loads(lesson.read_text(encoding="utf-8"))["cells"]
                     if c["cell_type"] == "markdown")
    said = re.search(r"dates: ([\d.]+)% → ([\d.]+)%; Multi30k, measured by `benchmarks/padding.py`: (\d+)% → (\d+)%",
                     prose)
    assert said, "lesson 07's summary: the sentence on padding"
    stored = re.search(r"shuffled, cut as they come .*?([\d.]+)%\nsorted by length, then cut .*?([\d.]+)%",
                       _outputs(lesson))
    assert stored, "lesson 07: the stored table of padding by batching"
    assert f"{float(stored.group(1)):.1f}" == said.group(1) and stored.group(2) == said.group(2)
    record = json.loads((ROOT / "benchmarks" / "results" / "multi30k_padding.json").read_text())
    assert (f"{100 * record['shuffled']['padding_fraction']:.0f}", f"{100 * record['sorted']['padding_fraction']:.0f}") \
        == (said.group(3), said.group(4))
