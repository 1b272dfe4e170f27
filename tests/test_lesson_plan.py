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
    # 00 to 10, and the second halves of the three lessons that issue 44 split in two: 00b, 08b and 09b.
    assert len(LESSONS) == 14
    assert [p.name[:3] for p in LESSONS if p.name[2] == "b"] == ["00b", "08b", "09b"]
    assert all(PLAN["LESSON_NAME"].match(p.name) for p in LESSONS) and not PLAN["LESSON_NAME"].match("rise.css")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_the_main_path_fits_a_class(path: Path):
    # 00, 08 and 09 needed two classes each by this measure: each is now two lessons, NN_name and NNb_name.
    plan = PLAN["plan"](path)
    assert plan.minutes <= PLAN["CLASS_MINUTES"], (
        f"{path.name}: about {plan.minutes:.0f} minutes on the main path ({plan.main}), more than a "
        f"{PLAN['CLASS_MINUTES']}-minute class; move what a class can skip to a going-further section "
        "(docs/AUTHORING.md)")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_no_slide_holds_more_than_a_slide(path: Path):
    over = [f"cell {slide.cell} {slide.title!r}: {', '.join(problems)}"
            for slide, problems in PLAN["slides_over_caps"](path)]
    assert over == [], (f"{path.name}: main-path slides over {PLAN['SLIDE_WORDS']} words or {PLAN['SLIDE_CODE_LINES']} "
                        "lines of code (split them, tighten them, or move what a class can skip to going further): "
                        + "; ".join(over))


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


def _code(source: str, outputs: list[dict], slide: str = "-", **metadata) -> dict:
    return {"cell_type": "code", "metadata": {"slideshow": {"slide_type": slide}, **metadata}, "source": source,
            "outputs": outputs, "execution_count": 1}


def test_the_measure_on_a_notebook_counted_by_hand(tmp_path: Path):
    picture = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
    printed = {"output_type": "stream", "name": "stdout", "text": "a\nb\nc\n"}  # 3 lines
    table = {"output_type": "display_data", "metadata": {},
             "data": {"text/markdown": "| x | y |\n| --- | --- |\n| 1 | 2 |\n", "text/plain": "<Markdown>"}}  # 3
    result = {"output_type": "execute_result", "metadata": {}, "execution_count": 1,
              "data": {"text/plain": "tensor([1, 2])"}}  # 1
    widget = {"output_type": "display_data", "metadata": {},
              "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "VBox()"}}
    cells = [
        _md("# Lesson 99 · Probe\n\n**Time:** stale", "slide"),  # slide 1: 3 words (not "#", "·" or the time line)
        # 6 words: a formula is one, a link its text, the folded answer its summary only
        _md("Why? $\\sqrt{d}$ is\n<details><summary>Answer</summary>hidden words here</details>\n"
            "[the end](x.md).", "-"),
        _code("x = 1\n\n\ny = 2\nprint(x)\n", [printed, picture]),  # 3 lines of code, 3 of output, 1 figure
        _md("## Two\n\n![a picture](figure.png)", "subslide"),  # slide 2: 1 word ("Two"), 1 figure
        _code("table\nresult", [table, result]),  # 2 lines of code, 4 lines of output
        _code("hidden = True", [printed], jupyter={"source_hidden": True}),  # folded: no code, 3 lines of output
        _md("Speaker note: a hundred words that the slides do not show.", "notes"),
        _code("live(draw)", [widget], "skip"),  # a control's cell: the slides skip it
        _md("## Going further: more\n\nmany words the class skips", "skip", further=True),
        _code("z = 3", [printed], "skip", tags=["going-further"]),
        _md("## Three", "slide"),  # slide 3: 1 word
    ]
    plan = PLAN["plan"](_notebook(tmp_path, cells))
    assert plan.main == PLAN["Measure"](slides=3, words=3 + 6 + 1 + 1, code_lines=5, output_lines=10, figures=2)
    assert plan.minutes == pytest.approx(3 + 11 / 120 + 5 / 12 + 10 / 20 + 2)
    assert (plan.further_sections, plan.further_slides) == (1, 1)
    line = plan.time_line()
    assert line.startswith("**Time:** about 6 minutes in class") and ": 3 slides, 11 words, 5 lines of code, " \
        "10 lines of output, 2 figures; 1 going-further section for a second reading." in line
    slides = PLAN["slides"](cells)
    assert [(s.cell, s.measure.slides, s.longest_code_cell) for s in slides] == [(0, 1, 3), (3, 1, 2), (10, 1, 0)]
    assert slides[0].measure.words == 9 and slides[1].measure.output_lines == 7


def test_the_slide_caps_can_fail(tmp_path: Path):
    long_code = "\n".join(f"x{i} = {i}" for i in range(PLAN["SLIDE_CODE_LINES"] + 1))
    wordy = " ".join(["word"] * (PLAN["SLIDE_WORDS"] + 1))
    cells = [_md("# Lesson\n\n**Time:** x", "slide"), _code(long_code, []), _md(f"## Wordy\n\n{wordy}", "slide"),
             _md("## Fine\n\nshort", "slide")]
    over = PLAN["slides_over_caps"](_notebook(tmp_path, cells))
    assert [(s.cell, problems) for s, problems in over] == [
        (0, [f"a code cell of {PLAN['SLIDE_CODE_LINES'] + 1} lines"]), (2, [f"{PLAN['SLIDE_WORDS'] + 2} words"])]
