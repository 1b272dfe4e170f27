"""Grading a class folder, and the command ``python -m minitransformer.grading`` (or ``python -m minitransformer grade``).

Every notebook is read before the first one runs, graded by :func:`.notebooks.grade_notebook`
(``--jobs`` at a time), and the JSON and CSV files are rewritten after each one, so a run that is
stopped keeps what it graded. See :data:`HELP`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import io
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from .notebooks import Report, _num, grade_notebook, load_references

__all__ = ["HELP", "grade_all", "main", "write_results"]

CONTAINER = ("docker run --rm --network none --memory 8g --cpus 2 -v \"$PWD\":/work -w /work IMAGE "
             "python -m minitransformer.grading grade submissions/ --no-sandbox")


# ------------------------------------------------------------------------------------------------

_NOT_STUDENTS = {"submitted", "autograded", "feedback", "source", "release", "submissions", "exercises"}


def _student(nb: Path, exercises: Sequence[str]) -> str:
    """The student a notebook belongs to, from its path alone (so any folder or file given names them alike).

    nbgrader's ``submitted/<student>/...``: the folder after ``submitted``. Otherwise a notebook named
    after an exercise (``alice/03_self_attention.ipynb``) belongs to the nearest folder that is not an
    exercise's name, and any other notebook (``class/alice.ipynb``) to its own name.
    """
    parts = nb.resolve().parts
    if "submitted" in parts[:-2]:
        return parts[len(parts) - 1 - parts[::-1].index("submitted") + 1]

    numbers = {e[:2] for e in exercises}

    def exercise_like(name: str) -> bool:  # "03_self_attention", "03_self_attention_submission", "03-attention"
        return name in exercises or (len(name) > 2 and name[:2] in numbers and name[2] in "_-")

    if not exercise_like(nb.stem):
        return nb.stem
    for folder in reversed(parts[:-1]):
        if folder and folder != "/" and not exercise_like(folder) and folder.lower() not in _NOT_STUDENTS:
            return folder
    return nb.stem


def _find(paths: Sequence[str], exercises: Sequence[str] = ()) -> list[tuple[Path, str]]:
    """(notebook, student) for every notebook under ``paths``; nbgrader's submitted/<student>/<assignment>/ understood."""
    found: list[tuple[Path, str]] = []
    for root in map(Path, paths):
        if root.is_file():
            found.append((root, _student(root, exercises)))
            continue
        if not root.is_dir():
            raise FileNotFoundError(f"no such notebook or folder: {root}")
        for nb in sorted(q for q in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts):
            found.append((nb, _student(nb, exercises)))
    return found


def _atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, flush it to disk, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def feedback_path(csv_path: Path) -> Path:
    return csv_path.with_name(csv_path.stem + "_feedback.csv")


def default_out(paths: Sequence[str]) -> Path:
    """``grades/`` beside (not inside) the first submissions folder, or beside the folder of a single notebook."""
    first = Path(paths[0]).resolve()
    folder = first.parent if first.is_dir() else first.parent.parent
    return folder / "grades"


def check_outputs(reports: Sequence[Path], inputs: Sequence[Path], notebooks: Sequence[Path]) -> str | None:
    """Why the report files cannot be written where asked (one line), or None when they can."""
    resolved = [r.resolve() for r in reports]
    for i, r in enumerate(resolved):
        for other in resolved[:i]:
            if r == other:
                return f"two reports would be written to one file, {reports[i]}: give --json and --csv different names"
    sources = {n.resolve() for n in notebooks}
    for report, r in zip(reports, resolved):
        if r.is_dir():
            return f"the report {report} is a folder; give a file name (e.g. {report / r.name}.json) or use --out"
        if r in sources or r.suffix == ".ipynb":
            return f"the report {report} would overwrite a submitted notebook; write reports elsewhere (--out DIR)"
        for given in inputs:
            g = given.resolve()
            if r == g or (g.is_dir() and g in r.parents):
                return (f"the report {report} is inside the submissions folder {given}; write reports elsewhere "
                        "(--out DIR), so that they are not mixed with what students handed in")
        folder = next((p for p in [r.parent, *r.parent.parents] if p.exists()), None)
        if folder is None or not folder.is_dir():
            return f"cannot write the report {report}: {folder} is not a folder"
        if not os.access(folder, os.W_OK | os.X_OK) or (r.exists() and not os.access(r, os.W_OK)):
            return f"cannot write the report {report}: no permission to write in {folder}"
    return None


def write_results(reports: Sequence[Report], json_path: Path | None, csv_path: Path | None) -> None:
    """The JSON (every report) and the CSV files: grades (one row per submission) and feedback (one row per lost point)."""
    if json_path is not None:
        _atomic(json_path, json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False) + "\n")
    if csv_path is None:
        return
    columns: list[str] = []
    for r in reports:
        columns += [t.grade_id for t in r.tasks if t.grade_id not in columns]
    grades = io.StringIO()
    writer = csv.writer(grades, lineterminator="\n")
    writer.writerow(["student", "exercise", "notebook", *columns, "total", "max", "error"])
    for r in reports:
        scores = {t.grade_id: _num(t.score) for t in r.tasks}
        writer.writerow([r.student, r.exercise or "", r.path, *[scores.get(c, "") for c in columns],
                         _num(r.score), _num(r.max_score), r.error or ""])
    _atomic(csv_path, grades.getvalue())
    feedback = io.StringIO()
    writer = csv.writer(feedback, lineterminator="\n")
    writer.writerow(["student", "exercise", "task", "title", "score", "points", "reason"])
    for r in reports:
        for t in r.tasks:
            if not t.passed:
                writer.writerow([r.student, r.exercise or "", t.grade_id, t.title, _num(t.score), _num(t.points),
                                 " ".join(t.message.split())])
    _atomic(feedback_path(csv_path), feedback.getvalue())


def grade_all(items: Sequence[tuple[Path, str]], *, jobs: int = 1, on_report: Callable[[Report], None] | None = None,
              **options: Any) -> list[Report]:
    """Grade many notebooks, ``jobs`` at a time; every file is read before the first one runs."""
    from ._sandbox import kill_all

    refs = options.pop("references", None) or load_references(options.pop("reference", None))
    contents: list[bytes | None] = []
    for path, _ in items:
        try:
            contents.append(path.read_bytes())
        except OSError:
            contents.append(None)
    packages: dict[Any, Any] = {}  # the sandbox's package copies, one per set of pieces taken out
    lock = threading.Lock()
    reports: list[Report | None] = [None] * len(items)

    def one(i: int) -> Report:
        path, student = items[i]
        with lock:
            if stopping.is_set():
                raise concurrent.futures.CancelledError
        report = grade_notebook(path, references=refs, package=packages, student=student,
                                data=contents[i] if contents[i] is not None else None, **options)
        with lock:
            if stopping.is_set():  # cut short by the instructor, not by the submission: no grade
                return report
            reports[i] = report
            if on_report:
                on_report(report)
        return report

    stopping = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(max(1, jobs))
    try:
        list(pool.map(one, range(len(items))))
    finally:  # stopped early (Ctrl-C, SIGTERM): what was graded is written, no runner outlives the grader
        stopping.set()
        kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        for package in packages.values():
            package.remove()
    return [r for r in reports if r is not None]


HELP = """Grade submitted exercise notebooks: the learner's code of each one runs in a sandbox, and every
task of its exercise is scored by the package's own checks (hidden tests included), which run in
the grader's process and only call the learner's code in the sandbox.

The sandbox is bubblewrap (bwrap): no network, no view of your files, of the other submissions or
of your processes, a private /tmp, time and memory limits, and nothing left running afterwards.
Without bubblewrap the grader refuses to run submissions unless --no-sandbox is given (then they
run with your rights: do that only inside a container). See docs/what_is_safe.md.

Folders are searched for *.ipynb. The student is found from the path: nbgrader's
submitted/<student>/..., else the folder of a notebook named after its exercise
(alice/03_self_attention.ipynb), else the notebook's own name (class/alice.ipynb). Writes
grades.json, grades.csv (one row per submission, one column per task) and grades_feedback.csv
(the reason for every lost point) into --out (default: a grades/ folder beside the submissions
folder), updated after every notebook. Exit status: 0 when every notebook was graded, 1 when one
could not be (unreadable, unknown exercise), 2 for bad arguments.

Example: python -m minitransformer.grading grade submissions/ --jobs 2

Course authors: `python -m minitransformer.grading make-exercises [--check]` regenerates
exercises/ and the reference from solutions/."""


def _seconds(text: str) -> float:
    """A finite number of seconds > 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0 (the code is untrusted: a limit is "
                                         f"needed), got {text!r}")
    return value


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m minitransformer.grading [grade] PATH ...`` or ``... make-exercises``: see ``--help``."""
    argv = list(argv if argv is not None else sys.argv[1:])
    if argv[:1] == ["make-exercises"]:
        from .generate import main as make

        return make(argv[1:])
    if argv[:1] == ["grade"]:
        argv = argv[1:]
    parser = argparse.ArgumentParser(prog="python -m minitransformer.grading", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="submitted notebooks, or folders searched for *.ipynb")
    parser.add_argument("--exercise", default=None, help="the exercise of every notebook (default: found from "
                        "each notebook's metadata, file or folder name, or content)")
    parser.add_argument("--out", type=Path, default=None, help="folder for grades.json, grades.csv and "
                        "grades_feedback.csv (default: grades/ beside the submissions folder)")
    parser.add_argument("--json", type=Path, default=None, help="JSON report (default OUT/grades.json)")
    parser.add_argument("--csv", type=Path, default=None,
                        help="CSV of grades (default OUT/grades.csv; the reasons go to <name>_feedback.csv)")
    parser.add_argument("--timeout", type=_seconds, default=120.0, help="seconds allowed per cell (default 120)")
    parser.add_argument("--notebook-timeout", type=_seconds, default=900.0,
                        help="seconds allowed per notebook (default 900)")
    parser.add_argument("--memory", type=int, default=4096, help="memory limit per submission in MiB, 0 for none "
                        "(default 4096)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder of reference *.json (default: the package's own)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at the same time (default 1)")
    parser.add_argument("--no-sandbox", action="store_true", help="run the submissions without bubblewrap, with "
                        "your rights (only inside a container or a throw-away machine)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    if args.memory < 0 or args.jobs < 1:
        parser.error(f"--memory must be >= 0 and --jobs >= 1, got --memory {args.memory} --jobs {args.jobs}")
    try:
        refs = load_references(args.reference)
        items = _find(args.paths, sorted(refs))
    except FileNotFoundError as err:
        parser.error(str(err))
    except (ValueError, KeyError, TypeError) as err:  # invalid JSON in --reference
        parser.error(f"cannot read the reference exercises in {args.reference}: {type(err).__name__}: {err}")
    if not items:
        parser.error("no notebooks found")
    if args.exercise and args.exercise not in refs:
        parser.error(f"unknown exercise {args.exercise!r}; known: {', '.join(sorted(refs))}")
    out = args.out if args.out is not None else default_out(args.paths)
    json_path = args.json if args.json is not None else out / "grades.json"
    csv_path = args.csv if args.csv is not None else out / "grades.csv"
    problem = check_outputs([json_path, csv_path, feedback_path(csv_path)], [Path(p) for p in args.paths],
                            [p for p, _ in items])
    if problem:
        parser.error(problem)
    if not args.no_sandbox:
        from ._sandbox import INSTALL_HINT, sandbox_available

        works, why = sandbox_available()
        if not works:
            print(f"python -m minitransformer.grading: error: {why}. Grading runs the students' code: it needs a "
                  f"sandbox. To grade, {INSTALL_HINT}.", file=sys.stderr)
            return 2
    # SIGTERM (a job scheduler, `kill`) ends the run like Ctrl-C: sandboxes killed, temporary folders removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    done: list[Report] = []

    def on_report(report: Report) -> None:
        done.append(report)
        write_results(done, json_path, csv_path)
        if not args.quiet:
            print(report.table(), end="\n\n", flush=True)

    reports = grade_all(items, jobs=args.jobs, on_report=on_report, references=refs, exercise=args.exercise,
                        timeout=args.timeout, notebook_timeout=args.notebook_timeout, memory_mb=args.memory,
                        sandbox=not args.no_sandbox)
    order = {str(p): i for i, (p, _) in enumerate(items)}
    reports.sort(key=lambda r: order.get(r.path, 0))
    write_results(reports, json_path, csv_path)
    rows = [["submission", "student", "score", ""]]
    rows += [[r.path, r.student, f"{_num(r.score)}/{_num(r.max_score)}", "(error)" if r.error else ""] for r in reports]
    print(_table(rows))
    print(f"wrote {json_path}, {csv_path} and {feedback_path(csv_path)}")
    return 1 if any(r.error for r in reports) else 0
