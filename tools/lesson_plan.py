"""Each lesson's plan for a class, measured from the notebook itself, and its "**Time:**" line.

A lesson has a main path, the cells the slides show, and "going further" sections: cells tagged
``going-further``, of slide type ``skip``, opened by a heading "Going further: ...". The main path
should fit a 50-minute class, about 30 slides at about 1.5 minutes a slide; the going-further
sections are for a second reading.

The "**Time:**" line of each lesson's first cell is written from two measurements: the slides the
notebook holds, and the stored output of its timing cell (``lesson ran in N s``, printed by a
cell near the end when the notebook was last executed). Nothing in it is typed by hand:

    python tools/lesson_plan.py            # print every lesson's plan
    python tools/lesson_plan.py --write    # rewrite the "**Time:**" lines from the notebooks
    python tools/lesson_plan.py --check    # exit 1 if a line is out of date (tests/test_lesson_plan.py)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MINUTES_PER_SLIDE = 1.5
MAX_MAIN_SLIDES = 32  # about 48 minutes at 1.5 minutes a slide: one 50-minute class
TAG = "going-further"
_RAN = re.compile(r"^lesson ran in (\d+) s$", re.MULTILINE)
_TIME_LINE = re.compile(r"^\*\*Time:\*\*.*$", re.MULTILINE)


def slide_type(cell: dict) -> str:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")


def is_going_further(cell: dict) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


@dataclass(frozen=True)
class LessonPlan:
    name: str
    main_slides: int  # slides and sub-slides the deck shows
    further_sections: int  # going-further sections (each opened by its own heading)
    further_slides: int  # the slides those sections held before they left the deck (their headings)
    ran_seconds: int | None  # the stored "lesson ran in N s", None if the notebook has no such output

    @property
    def class_minutes(self) -> int:
        return round(self.main_slides * MINUTES_PER_SLIDE / 5) * 5

    def time_line(self) -> str:
        further = (f"{self.further_sections} going-further section{'s' if self.further_sections > 1 else ''} "
                   f"({self.further_slides} more slide{'s' if self.further_slides > 1 else ''}) "
                   f"{'are' if self.further_sections > 1 else 'is'} "
                   "for a second reading" if self.further_sections else "there is no going-further section")
        ran = (f" Its code ran in {self.ran_seconds} s when the notebook was last executed top to bottom "
               "(nbclient, the engine of `jupyter nbconvert --execute`, on a 2-core CPU; a timing cell near the end "
               "measures it)." if self.ran_seconds is not None
               else "")
        return (f"**Time:** about {self.class_minutes} minutes in class: {self.main_slides} slides on the main path, "
                f"at about {MINUTES_PER_SLIDE:g} minutes a slide; {further}.{ran}")


def _heading(cell: dict) -> str:
    return "".join(cell["source"]).lstrip().split("\n", 1)[0]


def plan(path: Path) -> LessonPlan:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    main = sum(1 for c in cells if slide_type(c) in ("slide", "subslide"))
    openers = [c for c in cells if is_going_further(c) and c["cell_type"] == "markdown"
               and re.match(r"#+ Going further: ", _heading(c))]
    # Inside a section, every markdown cell that opens with a heading was a slide of its own.
    further = sum(1 for c in cells if is_going_further(c) and c["cell_type"] == "markdown"
                  and _heading(c).startswith("#"))
    outputs = "\n".join("".join(o.get("text", "")) for c in cells if c["cell_type"] == "code"
                        for o in c.get("outputs", []) if o.get("output_type") == "stream")
    ran = _RAN.findall(outputs)
    return LessonPlan(path.stem, main, len(openers), further, int(ran[-1]) if ran else None)


def structure_problems(path: Path) -> list[str]:
    """What is wrong with the lesson's going-further sections, in words (empty: nothing)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    problems = []
    for i, cell in enumerate(cells):
        inside = is_going_further(cell)
        if inside and slide_type(cell) != "skip":
            problems.append(f"cell {i} is going further but of slide type {slide_type(cell)!r}, not 'skip'")
        if not inside and slide_type(cell) == "notes" and i > 0 and is_going_further(cells[i - 1]):
            problems.append(f"cell {i}: a speaker note after a going-further section has no slide to belong to")
        starts = inside and (i == 0 or not is_going_further(cells[i - 1]))
        if starts and not re.match(r"#+ Going further: ", _heading(cell)):
            problems.append(f"cell {i} opens a going-further section without a heading 'Going further: ...'")
        ends = inside and (i + 1 == len(cells) or not is_going_further(cells[i + 1]))
        shown_next = next((j for j in range(i + 1, len(cells)) if slide_type(cells[j]) != "skip"), None)
        if ends and shown_next is not None and slide_type(cells[shown_next]) not in ("slide", "subslide"):
            problems.append(f"cell {shown_next}, the first the slides show after a going-further section, starts "
                            "no slide: the deck would glue it to the slide before the section")
    return problems


def write_time_line(path: Path, check: bool = False) -> bool:
    """Rewrite the lesson's "**Time:**" line; with check, only say whether it is up to date."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    first = notebook["cells"][0]
    source = "".join(first["source"])
    if not _TIME_LINE.search(source):
        raise ValueError(f"{path.name}: its first cell has no line starting '**Time:**' to write")
    new = _TIME_LINE.sub(lambda _: plan(path).time_line(), source, count=1)
    if new == source:
        return True
    if not check:
        first["source"] = new.splitlines(keepends=True)
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the lessons' '**Time:**' lines")
    parser.add_argument("--check", action="store_true", help="exit 1 if a '**Time:**' line is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path in LESSONS:
        p = plan(path)
        print(f"{p.name:<32} main {p.main_slides:>2} slides (~{p.class_minutes} min), going further "
              f"{p.further_sections} sections / {p.further_slides} slides, ran in {p.ran_seconds} s")
        if (args.write or args.check) and not write_time_line(path, check=args.check):
            stale.append(path.name)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)} (run python tools/lesson_plan.py --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
