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
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from .notebooks import Report, _num, grade_notebook, load_references

__all__ = ["HELP", "grade_all", "main", "write_results"]

CONTAINER = ("docker run --rm --network none --memory 8g --cpus 2 -v \"$PWD\":/work -w /work IMAGE "
             "python -m minitransformer.grading grade submissions/")


# ------------------------------------------------------------------------------------------------

def _find(paths: Sequence[str]) -> list[tuple[Path, str]]:
    """(notebook, student) for every notebook under ``paths``; nbgrader's submitted/<student>/<assignment>/ understood."""
    found: list[tuple[Path, str]] = []
    for root in map(Path, paths):
        if root.is_file():
            found.append((root, root.stem))
            continue
        if not root.is_dir():
            raise FileNotFoundError(f"no such notebook or folder: {root}")
        for nb in sorted(q for q in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts):
            parts = nb.relative_to(root).parts
            if "submitted" in parts[:-1] and parts.index("submitted") + 2 < len(parts):
                student = parts[parts.index("submitted") + 1]
            elif root.name == "submitted" and len(parts) >= 2:
                student = parts[0]
            elif len(parts) >= 2:
                student = parts[0]
            else:
                student = nb.stem
            found.append((nb, student))
    return found


def _atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


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
    _atomic(csv_path.with_name(csv_path.stem + "_feedback.csv"), feedback.getvalue())


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


HELP = f"""Grade submitted exercise notebooks: each one runs in its own process, and every task of its
exercise is scored by the package's own checks (hidden tests included).

WARNING: grading EXECUTES the submitted code, with your user's rights. Each submission runs in a
private temporary folder, in its own process group, with time and memory limits, but it can read
and write what you can. For a class, run the grader inside a container, e.g.:

  {CONTAINER}

Folders are searched for *.ipynb; in nbgrader's layout (submitted/<student>/<exercise>/*.ipynb)
the student is the folder's name. Writes grades.json, grades.csv (one row per submission, one
column per task) and grades_feedback.csv (the reason for every lost point), updated after every
notebook. Exit status: 0 when every notebook was graded, 1 when one could not be (unreadable,
unknown exercise), 2 for bad arguments.

Course authors: `python -m minitransformer.grading make-exercises [--check]` regenerates
exercises/ and the reference from solutions/."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m minitransformer.grading [grade] PATH ...`` or ``... make-exercises``: see ``--help``."""
    argv = list(argv if argv is not None else __import__("sys").argv[1:])
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
    parser.add_argument("--json", type=Path, default=Path("grades.json"), help="JSON report (default grades.json)")
    parser.add_argument("--csv", type=Path, default=Path("grades.csv"),
                        help="CSV of grades (default grades.csv; the reasons go to <name>_feedback.csv)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per cell (default 120)")
    parser.add_argument("--notebook-timeout", type=float, default=900.0,
                        help="seconds allowed per notebook (default 900)")
    parser.add_argument("--memory", type=int, default=4096, help="memory limit per submission in MiB, 0 for none "
                        "(default 4096; where the OS supports it)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="folder of reference *.json (default: the package's own)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at the same time (default 1)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.notebook_timeout <= 0:
        parser.error("--timeout and --notebook-timeout must be > 0 (a limit is needed: the code is untrusted)")
    if args.memory < 0 or args.jobs < 1:
        parser.error("--memory must be >= 0 and --jobs >= 1")
    try:
        items = _find(args.paths)
        refs = load_references(args.reference)
    except FileNotFoundError as err:
        parser.error(str(err))
    if not items:
        parser.error("no notebooks found")
    if args.exercise and args.exercise not in refs:
        parser.error(f"unknown exercise {args.exercise!r}; known: {', '.join(sorted(refs))}")
    # SIGTERM (a job scheduler, `kill`) ends the run like Ctrl-C: runners killed, temporary folders removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    done: list[Report] = []

    def on_report(report: Report) -> None:
        done.append(report)
        write_results(done, args.json, args.csv)
        if not args.quiet:
            print(report.table(), end="\n\n", flush=True)

    reports = grade_all(items, jobs=args.jobs, on_report=on_report, references=refs, exercise=args.exercise,
                        timeout=args.timeout, notebook_timeout=args.notebook_timeout, memory_mb=args.memory)
    order = {str(p): i for i, (p, _) in enumerate(items)}
    reports.sort(key=lambda r: order.get(r.path, 0))
    write_results(reports, args.json, args.csv)
    width = max(len(r.path) for r in reports)
    print("submission".ljust(width) + "  student  score")
    for r in reports:
        print(r.path.ljust(width) + f"  {r.student}  {_num(r.score)}/{_num(r.max_score)}" + ("  (error)" if r.error else ""))
    print(f"wrote {args.json}, {args.csv} and {args.csv.with_name(args.csv.stem + '_feedback.csv')}")
    return 1 if any(r.error for r in reports) else 0
