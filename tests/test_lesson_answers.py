"""The numbers the lessons' prose gives are the numbers their data give (issue 44).

Each "Try it" answer is recomputed here from the playground function behind its control, at the
settings the question names, and each summary figure from the stored output or record it describes.
The stored notebooks are read, not run.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def _cells(lesson: str) -> list[dict]:
    path = next(NOTEBOOKS.glob(f"{lesson}_*.ipynb"))
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _markdown(lesson: str, starts: str) -> str:
    found = ["".join(c["source"]) for c in _cells(lesson) if c["cell_type"] == "markdown"
             and "".join(c["source"]).startswith(starts)]
    assert len(found) == 1, f"lesson {lesson}: expected one markdown cell starting {starts!r}, found {len(found)}"
    return found[0]


def _answer(lesson: str) -> str:
    """The folded answer of the lesson's "Try it" question."""
    text = _markdown(lesson, "## Try it")
    assert "**Predict before you move it:**" in text and "**Your question:**" in text
    found = re.search(r"<details><summary>Answer</summary>(.*?)</details>", text, re.DOTALL)
    assert found, f"lesson {lesson}: the 'Try it' question has no folded answer"
    return found.group(1)


def _outputs(lesson: str) -> str:
    return "\n".join("".join(o.get("text", "")) for c in _cells(lesson) if c["cell_type"] == "code"
                     for o in c.get("outputs", []))


@pytest.mark.parametrize("lesson", ["01", "02"])
def test_every_try_it_has_a_prediction_and_a_folded_answer(lesson: str):
    assert _answer(lesson).strip()


def test_lesson_01_try_it():
    from minitransformer.playground.embeddings import embedding_scale

    answer = _answer("01")
    ratios = {d: embedding_scale(d, scaled=False, init="normal").ratio for d in (128, 256)}
    assert ratios[128] >= 0.1 > ratios[256]
    assert f"$d_{{\\text{{model}}}} = 256$ the ratio is {ratios[256]:.3f} ({ratios[128]:.3f} at 128)" in answer
    pytorch = [embedding_scale(d, scaled=False, init="pytorch").ratio for d in (32, 512, 2048)]
    assert all(abs(r - 1.4) < 0.05 for r in pytorch) and "near 1.4" in answer


def test_lesson_01_summary_gives_the_table_it_prints():
    rows = dict(re.findall(r"^(normal start, sinusoids|Xavier start, sinusoids|normal start, no positions at all)"
                           r".*?\s([\d.]+);", _outputs("01"), re.MULTILINE))
    normal, xavier, none = (float(rows[k]) for k in ("normal start, sinusoids", "Xavier start, sinusoids",
                                                      "normal start, no positions at all"))
    summary = _markdown("01", "## Summary")
    assert (f"cost\n  {normal - xavier:.1f} BLEU against the normal start ({xavier:.1f} against {normal:.1f})"
            in summary and f"no positions at all ({none:.1f})" in summary)
    assert xavier > none, "the summary says the Xavier start is on a level with no positions, not below"


def test_lesson_02_try_it():
    from minitransformer.playground.positional import offset_rotation

    answer = _answer("02")
    dots = {base: offset_rotation(10, 64, 60, base).expected for base in (10000.0, 100.0)}
    assert f"dot product is {dots[10000.0]:.1f} with base 10000 and {dots[100.0]:.1f} with base 100" in answer
    slowest = {base: 2 * math.pi * base ** (62 / 64) for base in (100.0, 10000.0)}
    assert f"about {round(slowest[100.0], -1):.0f} positions" in answer
    assert f"about {round(slowest[10000.0], -3) / 1000:.0f},000 at base 10000" in answer
    near = [k for k in range(1, 51) if math.cos(k) > 0.95]  # the control's offsets: 0 to 50
    assert near[0] == 6 and "$k = 6$" in answer
    assert max(range(1, 51), key=math.cos) == 44 and "$k = 44$, seven turns" in answer
