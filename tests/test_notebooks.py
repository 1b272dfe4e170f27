"""Static checks of the committed lessons (nbval executes them; these read the stored files).

* code cells were run in order from the top of a fresh kernel (execution counts 1, 2, 3...);
* no stored output is an error;
* no notebook defines a function or class with the name of a package symbol: the package
  is the single definition of every reusable piece, lessons import it;
* lessons are slide-ready: nbval's output checks are cell tags (a ``# NBVAL_CHECK_OUTPUT``
  comment would show on the slides), RISE may scroll a tall slide, every slide of lessons 06 on
  starts with a heading, and every lesson ends by linking its exercise of the same name (the second half
  of a lesson split in two, ``NNb_name``, links the exercise of its first half).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import runpy
from pathlib import Path

import pytest

import minitransformer

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NOTEBOOKS = LESSONS + sorted((ROOT / "solutions").glob("*.ipynb"))


#: tools/build_site.py (standard library only at import): the site's rules, which the lessons follow too.
BUILD = runpy.run_path(str(ROOT / "tools" / "build_site.py"))


def _exercise_of(lesson: Path) -> str:
    """The exercise a lesson links (the site's rule: a second half, ``NNb_name``, links its first half's)."""
    return f"../exercises/{BUILD['exercise_of'](lesson).name}"


def _package_symbols() -> set[str]:
    names: set[str] = set()
    for info in pkgutil.walk_packages(minitransformer.__path__, prefix="minitransformer."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_"):
                continue
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__.startswith("minitransformer"):
                names.add(name)
    return names


PACKAGE_SYMBOLS = _package_symbols()


def _code_cells(path: Path) -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in notebook["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_there_are_lessons():
    names = {p.stem for p in NOTEBOOKS}
    assert {"00_introduction", "00b_model_map", "03_self_attention", "06_decoder_and_masking", "07_training",
            "08_decoding_and_gpu"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_in_order_without_errors(path: Path):
    cells = _code_cells(path)
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name} was not stored executed top to bottom in a fresh kernel: execution counts {counts}"
    )
    for index, cell in enumerate(cells):
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", f"{path.name}, code cell {index + 1} stores an error"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_package_symbol_is_redefined(path: Path):
    redefined = []
    for cell in _code_cells(path):
        # Drop IPython magics and shell escapes, which are not Python.
        source = "\n".join(
            line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in PACKAGE_SYMBOLS:
                redefined.append(node.name)
    assert not redefined, f"{path.name} re-defines package symbols {redefined}: import them from minitransformer"


def test_the_redefinition_check_can_fail(tmp_path: Path):
    # Guard against a check that never fires: a cell defining MultiHeadAttention is caught.
    assert "MultiHeadAttention" in PACKAGE_SYMBOLS and "greedy_decode" in PACKAGE_SYMBOLS
    source = "class MultiHeadAttention:\n    pass\n"
    names = [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]
    assert set(names) & PACKAGE_SYMBOLS


def _slide_type(cell: dict) -> str:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_lessons_are_slide_ready(path: Path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert notebook["metadata"].get("rise", {}).get("scroll") is True, f"{path.name}: set metadata rise.scroll = true"
    for index, cell in enumerate(notebook["cells"]):
        source = "".join(cell["source"])
        assert not (cell["cell_type"] == "code" and "# NBVAL_CHECK_OUTPUT" in source), (
            f"{path.name}, cell {index}: use the cell tag nbval-check-output, not the comment (it shows on slides)"
        )
        if path.name >= "06" and _slide_type(cell) in ("slide", "subslide"):
            assert cell["cell_type"] == "markdown" and source.lstrip().startswith("#"), (
                f"{path.name}, cell {index}: a slide should start with a heading"
            )
    exercise = _exercise_of(path)
    assert any(exercise in "".join(c["source"]) for c in notebook["cells"][-3:]), (
        f"{path.name} should end by linking its exercise {exercise}"
    )


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_speaker_notes_stay_out_of_the_learners_way(path: Path):
    # Notes are for the slides (RISE's speaker view, the site's decks): in JupyterLab they are collapsed
    # (metadata jupyter.source_hidden), and the site's lesson pages leave them out (tools/build_site.py).
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for index, cell in enumerate(notebook["cells"]):
        source = "".join(cell["source"])
        is_note = _slide_type(cell) == "notes"
        assert is_note == source.startswith("Speaker note"), (
            f"{path.name}, cell {index}: a speaker note should be a cell of slide type 'notes' starting 'Speaker notes:'")
        if is_note:
            assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, (
                f"{path.name}, cell {index}: collapse the speaker note (metadata jupyter.source_hidden = true)")


def test_the_site_pages_leave_the_speaker_notes_out():
    build = BUILD
    notebook = json.loads((ROOT / "notebooks" / "03_self_attention.ipynb").read_text(encoding="utf-8"))
    notes = [c for c in notebook["cells"] if _slide_type(c) == "notes"]
    assert notes, "lesson 03 should have speaker notes for this test"
    page = build["web_notebook"](notebook, {"cell_type": "markdown", "metadata": {}, "source": "links"})
    assert not [c for c in page["cells"] if "Speaker note" in "".join(c["source"])]
    kept = [c for c in notebook["cells"] if _slide_type(c) != "notes"]
    assert [c["source"] for c in page["cells"] if c["cell_type"] == "code"] == [
        c["source"] for c in kept if c["cell_type"] == "code"]  # every code cell stays
