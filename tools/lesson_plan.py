"""Each lesson's plan for a class, measured from what its slides hold, and its "**Time:**" line.

A lesson has a main path, the cells the slides show, and "going further" sections: cells tagged
``going-further``, of slide type ``skip``, opened by a heading "Going further: ...". The main path
should fit a 50-minute class; the going-further sections are for a second reading.

A slide's time depends on what it holds, not only on how many slides there are. The estimate of
the main path adds (the rates of the course's teaching review, docs/AUTHORING.md):

* one minute per slide (or sub-slide), to set it up;
* one minute per 120 words of prose (markdown: a formula counts as one word, a link as its text, an
  image and HTML tags as none, and a folded answer, ``<details>``, counts only its ``<summary>``
  line: the slide shows it closed; the "**Time:**" line is not counted);
* one minute per 12 lines of code (non-blank lines; a cell whose source is folded,
  ``metadata.jupyter.source_hidden``, shows no code);
* one minute per 20 lines of printed output (streams, text results, markdown tables, one line per
  row of an HTML table);
* one minute per figure (a stored image, or an image in the prose).

Speaker notes, ``skip`` cells (a live control's cell among them) and going-further sections are
left out: the slides do not show them.

The "**Time:**" line of each lesson's first cell is written from that measure and from the stored
output of the timing cell (``lesson ran in N s``, printed by a cell near the end when the notebook
was last executed). Nothing in it is typed by hand:

    python tools/lesson_plan.py            # print every lesson's plan
    python tools/lesson_plan.py --slides   # ... and each main-path slide over the caps
    python tools/lesson_plan.py --write    # rewrite the "**Time:**" lines from the notebooks
    python tools/lesson_plan.py --check    # exit 1 if a line is out of date (tests/test_lesson_plan.py)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A lesson is ``NN_name.ipynb``; a lesson split in two for a class each adds ``NNb_name.ipynb`` (issue 44), which
#: sorts right after its first half and shares its exercise, ``exercises/NN_name.ipynb``.
LESSON_NAME = re.compile(r"^\d{2}b?_\w+\.ipynb$")
LESSONS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if LESSON_NAME.match(p.name))
CLASS_MINUTES = 50  # one class
WORDS_PER_MINUTE = 120
CODE_LINES_PER_MINUTE = 12
OUTPUT_LINES_PER_MINUTE = 20
MINUTES_PER_SLIDE = 1.0
MINUTES_PER_FIGURE = 1.0
SLIDE_WORDS = 120  # about the most prose one slide should hold
SLIDE_CODE_LINES = 15  # about the most code one slide should hold
TAG = "going-further"
_RAN = re.compile(r"^lesson ran in (\d+) s$", re.MULTILINE)
_TIME_LINE = re.compile(r"^\*\*Time:\*\*.*$", re.MULTILINE)
_IMAGES = ("image/png", "image/jpeg", "image/svg+xml")


def slide_type(cell: dict) -> str:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")


def is_going_further(cell: dict) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


def on_main_path(cell: dict) -> bool:
    """Whether the slides show the cell: not skipped, not a speaker note, not going further."""
    return slide_type(cell) not in ("skip", "notes") and not is_going_further(cell)


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def prose_words(markdown: str) -> int:
    """Words of a markdown cell as a slide shows them (see the module's docstring)."""
    text = _TIME_LINE.sub("", markdown)  # the line this tool writes is not counted, so that it can be rewritten
    text = re.sub(r"<details>.*?(<summary>.*?</summary>).*?</details>", r"\1", text, flags=re.DOTALL)
    text = re.sub(r"\$\$.+?\$\$|\$[^$\n]+\$", " formula ", text, flags=re.DOTALL)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)|<img\b[^>]*>", " ", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return sum(1 for token in text.split() if re.search(r"[A-Za-z0-9]", token))


def code_lines(cell: dict) -> int:
    if cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"):
        return 0
    return sum(1 for line in _text(cell["source"]).splitlines() if line.strip())


def output_lines(cell: dict) -> tuple[int, int]:
    """(lines of printed output, figures) of a code cell's stored outputs."""
    lines = figures = 0
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            lines += len(_text(output.get("text", "")).rstrip("\n").splitlines())
            continue
        data = output.get("data", {})
        if any(kind in data for kind in _IMAGES):
            figures += 1
        elif "text/html" in data:
            html = _text(data["text/html"])
            rows = len(re.findall(r"<tr\b", html))
            lines += rows or len(re.sub(r"<[^>]+>", "", html).strip().splitlines())
        elif "text/markdown" in data:
            lines += len(_text(data["text/markdown"]).strip().splitlines())
        elif "text/plain" in data and not any(k.startswith("application/vnd.jupyter.widget") for k in data):
            lines += len(_text(data["text/plain"]).strip().splitlines())
    return lines, figures


@dataclass(frozen=True)
class Measure:
    """What a stretch of the main path holds (a slide, or the whole lesson)."""

    slides: int = 0
    words: int = 0
    code_lines: int = 0
    output_lines: int = 0
    figures: int = 0

    def __add__(self, other: Measure) -> Measure:
        return Measure(self.slides + other.slides, self.words + other.words, self.code_lines + other.code_lines,
                       self.output_lines + other.output_lines, self.figures + other.figures)

    @property
    def minutes(self) -> float:
        return (self.slides * MINUTES_PER_SLIDE + self.words / WORDS_PER_MINUTE
                + self.code_lines / CODE_LINES_PER_MINUTE + self.output_lines / OUTPUT_LINES_PER_MINUTE
                + self.figures * MINUTES_PER_FIGURE)


def measure_cell(cell: dict) -> Measure:
    """What one cell adds to the main path (nothing if the slides do not show it)."""
    if not on_main_path(cell):
        return Measure()
    slides = int(slide_type(cell) in ("slide", "subslide"))
    if cell["cell_type"] == "markdown":
        source = _text(cell["source"])
        pictures = len(re.findall(r"!\[[^\]]*\]\(|<img\b", source))
        return Measure(slides, prose_words(source), 0, 0, pictures)
    if cell["cell_type"] == "code":
        lines, figures = output_lines(cell)
        return Measure(slides, 0, code_lines(cell), lines, figures)
    return Measure(slides)


@dataclass(frozen=True)
class Slide:
    """One slide of the main path: the index of the cell that starts it, its heading, what it holds."""

    cell: int
    title: str
    measure: Measure
    longest_code_cell: int  # the most code lines of one of its cells

    def over_caps(self) -> list[str]:
        problems = []
        if self.measure.words > SLIDE_WORDS:
            problems.append(f"{self.measure.words} words")
        if self.longest_code_cell > SLIDE_CODE_LINES:
            problems.append(f"a code cell of {self.longest_code_cell} lines")
        return problems


def slides(cells: list[dict]) -> list[Slide]:
    """The main path cut into slides (a cell before the first slide belongs to a slide of its own)."""
    found: list[Slide] = []
    start, title, total, longest = 0, "", Measure(), 0
    for i, cell in enumerate(cells):
        if not on_main_path(cell):
            continue
        if slide_type(cell) in ("slide", "subslide") and (total != Measure() or longest):
            found.append(Slide(start, title, total, longest))
            start, title, total, longest = i, "", Measure(), 0
        elif total == Measure():
            start = i
        if not title:
            title = _heading(cell) if cell["cell_type"] == "markdown" else ""
        total = total + measure_cell(cell)
        if cell["cell_type"] == "code":
            longest = max(longest, code_lines(cell))
    if total != Measure() or longest:
        found.append(Slide(start, title, total, longest))
    return found


def _heading(cell: dict) -> str:
    return _text(cell["source"]).lstrip().split("\n", 1)[0]


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class LessonPlan:
    name: str
    main: Measure  # what the slides show
    further_sections: int  # going-further sections (each opened by its own heading)
    further_slides: int  # the slides those sections would make (their headings)
    ran_seconds: int | None  # the stored "lesson ran in N s", None if the notebook has no such output

    @property
    def main_slides(self) -> int:
        return self.main.slides

    @property
    def minutes(self) -> float:
        """The estimate of the main path in minutes, unrounded."""
        return self.main.minutes

    @property
    def class_minutes(self) -> int:
        """The estimate rounded to the minute, as the lesson and the README give it."""
        return round(self.minutes)

    def time_line(self) -> str:
        m = self.main
        further = (f"; {_plural(self.further_sections, 'going-further section')} for a second reading"
                   if self.further_sections else "")
        ran = (f" The code ran in {self.ran_seconds} s when last executed top to bottom (nbclient, 2-core CPU)."
               if self.ran_seconds is not None else "")
        return (f"**Time:** about {self.class_minutes} minutes in class, estimated from the main path "
                f"(`tools/lesson_plan.py`): {_plural(m.slides, 'slide')}, {_plural(m.words, 'word')}, "
                f"{_plural(m.code_lines, 'line')} of code, {_plural(m.output_lines, 'line')} of output, "
                f"{_plural(m.figures, 'figure')}{further}.{ran}")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def plan(path: Path) -> LessonPlan:
    cells = _cells(path)
    main = Measure()
    for cell in cells:
        main = main + measure_cell(cell)
    openers = [c for c in cells if is_going_further(c) and c["cell_type"] == "markdown"
               and re.match(r"#+ Going further: ", _heading(c))]
    # Inside a section, every markdown cell that opens with a heading would be a slide of its own.
    further = sum(1 for c in cells if is_going_further(c) and c["cell_type"] == "markdown"
                  and _heading(c).startswith("#"))
    outputs = "\n".join(_text(o.get("text", "")) for c in cells if c["cell_type"] == "code"
                        for o in c.get("outputs", []) if o.get("output_type") == "stream")
    ran = _RAN.findall(outputs)
    return LessonPlan(path.stem, main, len(openers), further, int(ran[-1]) if ran else None)


def slides_over_caps(path: Path) -> list[tuple[Slide, list[str]]]:
    """The main path's slides holding more than about a slide's worth (SLIDE_WORDS, SLIDE_CODE_LINES)."""
    return [(s, s.over_caps()) for s in slides(_cells(path)) if s.over_caps()]


def structure_problems(path: Path) -> list[str]:
    """What is wrong with the lesson's going-further sections, in words (empty: nothing)."""
    cells = _cells(path)
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
    source = _text(first["source"])
    if not _TIME_LINE.search(source):
        raise ValueError(f"{path.name}: its first cell has no line starting '**Time:**' to write")
    new = _TIME_LINE.sub(lambda _: plan(path).time_line(), source, count=1)
    if new == source:
        return True
    if not check:
        first["source"] = new.splitlines(keepends=True)
        temporary = path.with_name(f".{path.name}.tmp")  # one atomic replace: no half-written lesson
        temporary.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the lessons' '**Time:**' lines")
    parser.add_argument("--check", action="store_true", help="exit 1 if a '**Time:**' line is out of date")
    parser.add_argument("--slides", action="store_true", help="list each main-path slide over the caps")
    args = parser.parse_args(argv)
    stale = []
    print(f"{'lesson':<30} {'min':>4} {'slides':>6} {'words':>6} {'code':>5} {'output':>6} {'figs':>4}  going further")
    for path in LESSONS:
        p = plan(path)
        m = p.main
        flag = " > class" if p.minutes > CLASS_MINUTES else ""
        print(f"{p.name:<30} {p.minutes:>4.0f} {m.slides:>6} {m.words:>6} {m.code_lines:>5} {m.output_lines:>6} "
              f"{m.figures:>4}  {p.further_sections} sections / {p.further_slides} slides, ran in {p.ran_seconds} s"
              f"{flag}")
        if args.slides:
            for slide, problems in slides_over_caps(path):
                print(f"    cell {slide.cell:>3} {slide.title[:50]!r}: {', '.join(problems)}")
        if (args.write or args.check) and not write_time_line(path, check=args.check):
            stale.append(path.name)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)} (run python tools/lesson_plan.py --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
