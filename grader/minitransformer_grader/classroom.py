"""Grading a class folder, and the command ``python -m minitransformer_grader`` (or ``python -m minitransformer grade``).

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
import re
import signal
import stat
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Any, Callable, Sequence

from .notebooks import NoSandbox, Report, number_text, grade_notebook, load_references

__all__ = ["HELP", "grade_all", "main", "write_results"]

CONTAINER = ("docker run --rm --network none --memory 8g --cpus 2 -v \"$PWD\":/work -w /work IMAGE "
             "python -m minitransformer_grader grade submissions/ --no-sandbox")


# ------------------------------------------------------------------------------------------------

_NOT_STUDENTS = {"submitted", "autograded", "feedback", "source", "release", "submissions", "exercises"}


def _exercise_like(name: str, exercises: Sequence[str]) -> bool:
    """ "03_self_attention", "03_self_attention_submission", "03-attention": named after an exercise.

    A number goes on with a letter: a student id such as ``07-1111`` is not an exercise.
    """
    numbers = {e[:2] for e in exercises}
    return name in exercises or (len(name) > 3 and name[:2] in numbers and name[2] in "_-" and name[3].isalpha())


def _nfc(name: str) -> str:
    """A student's name in one Unicode form (NFC): the composed and decomposed spellings of é are one student."""
    return unicodedata.normalize("NFC", name)


def look_alike(name: str) -> str | None:
    """Why ``name`` may not be who it seems: letters of several scripts (a Cyrillic о among Latin letters)."""
    scripts = set()
    for ch in name:
        if ch.isalpha():
            try:
                scripts.add(unicodedata.name(ch).split(" ")[0])
            except ValueError:
                scripts.add("UNNAMED")
    if len(scripts) > 1:
        return f"the student name mixes letters of several scripts ({', '.join(sorted(scripts))}): it may imitate another"
    return None


def _student(nb: Path, exercises: Sequence[str], root: Path | None = None) -> str:
    """The student a notebook belongs to, from the folder layout alone (no link is followed or resolved).

    nbgrader's ``submitted/<student>/...``: the folder after ``submitted``. Otherwise, under a folder
    given to the grader (``root``), the first folder below it that is not an exercise's name
    (``class/mallory/bob/x.ipynb`` is mallory's); then a notebook's own name when it is not an
    exercise's (``class/alice.ipynb``); then the nearest such folder above it
    (``alice/03_self_attention.ipynb`` given alone).
    """
    return _nfc(_student_folder(nb, exercises, root))


def _student_folder(nb: Path, exercises: Sequence[str], root: Path | None) -> str:
    full = Path(os.path.abspath(nb)).parts
    below = nb.relative_to(root).parts[:-1] if root is not None else ()
    above = len(full) - 1 - len(below)  # the parts of the folder given (all but the file when none was)
    if "submitted" in full[:above]:  # the folder given is submitted/ or inside it: the part after it
        return full[full.index("submitted") + 1] if full.index("submitted") + 1 < len(full) - 1 else nb.stem
    if below[:1] == ("submitted",) and len(below) > 1:  # the course folder given: its own submitted/
        return below[1]
    for folder in below:
        if not _exercise_like(folder, exercises) and folder.lower() not in _NOT_STUDENTS:
            return folder
    if not _exercise_like(nb.stem, exercises):
        return nb.stem
    for folder in reversed(full[:-1]):
        if folder and folder != "/" and not _exercise_like(folder, exercises) and folder.lower() not in _NOT_STUDENTS:
            return folder
    return nb.stem


def _nested(nb: Path, root: Path | None = None) -> bool:
    """True for a ``submitted/`` folder inside a student's folder (it would name rows after other students)."""
    full = Path(os.path.abspath(nb)).parts[:-1]
    if "submitted" in full and "submitted" in full[full.index("submitted") + 2:]:
        return True
    below = nb.relative_to(root).parts[:-1] if root is not None else ()
    return "submitted" in below[1:]  # class/mallory/submitted/carol/...: only the top submitted/ names students


def _kind(mode: int, links: int) -> str | None:
    """Why a directory entry is not a submission to read (None: a plain file of its own)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link; links are not followed"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, a device or a socket)"
    if links > 1:
        return "a hard link (the file has other names, perhaps outside the submissions)"
    return None


_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# Each notebook found by a walk: the folder given, the names below it and the (device, inode) of every folder and
# of the file, as the walk saw them. The notebook is read through the same folders, opened one by one without
# following a link, each checked to be the one listed (read_submission): a folder swapped after the listing is refused.
_LOCATED: dict[Path, tuple[Path, tuple[str, ...], tuple[tuple[int, int], ...]]] = {}


def _walk(root: Path, exercises: Sequence[str], found: list[tuple[Path, str]],
          refused: list[tuple[Path, str, str]]) -> None:
    """Every notebook under ``root``, walked with folder descriptors (never a path resolved twice, no link followed)."""
    top = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    stack: list[tuple[int, Path, tuple[str, ...], tuple[tuple[int, int], ...]]] = [(top, root, (), ())]
    while stack:
        fd, here, names, ids = stack.pop()
        try:
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda e: os.fsencode(e.name))
            subfolders = []
            for entry in entries:
                path = here / entry.name
                try:
                    info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing
                if stat.S_ISDIR(info.st_mode):
                    if entry.name != ".ipynb_checkpoints":
                        subfolders.append((entry.name, info))
                    continue
                if stat.S_ISLNK(info.st_mode) and not entry.name.endswith(".ipynb"):
                    try:
                        target_is_dir = stat.S_ISDIR(os.stat(entry.name, dir_fd=fd).st_mode)
                    except OSError:
                        target_is_dir = False
                    if target_is_dir:
                        refused.append((path, _student(path / "x.ipynb", exercises, root),
                                        "a symbolic link to a folder; links are not followed"))
                    continue
                if not entry.name.endswith(".ipynb"):
                    continue
                student = _student(path, exercises, root)
                why = _kind(info.st_mode, info.st_nlink)
                if why is None and _nested(path, root):
                    why = "a submitted/ folder inside a student's folder; only the top one names students"
                if why:
                    refused.append((path, student, why))
                else:
                    _LOCATED[path] = (root, (*names, entry.name), (*ids, (info.st_dev, info.st_ino)))
                    found.append((path, student))
            for name, info in reversed(subfolders):
                try:
                    sub = os.open(name, _DIRECTORY, dir_fd=fd)
                except OSError:  # replaced by a link (or removed) since the listing
                    refused.append((here / name, _student(here / name / "x.ipynb", exercises, root),
                                    "a folder that changed while the grader listed it (a link now); not followed"))
                    continue
                now = os.fstat(sub)
                if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                    os.close(sub)
                    refused.append((here / name, _student(here / name / "x.ipynb", exercises, root),
                                    "a folder that changed while the grader listed it; not followed"))
                    continue
                stack.append((sub, here / name, (*names, name), (*ids, (info.st_dev, info.st_ino))))
        finally:
            os.close(fd)


def _open_located(path: Path) -> int:
    """The notebook a walk found, opened through the folders it listed; Refused if one of them changed since."""
    root, names, ids = _LOCATED[path]
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, name in enumerate(names):
            last = i == len(names) - 1
            flags = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0)) if last else _DIRECTORY
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except OSError as err:
                raise Refused("a folder or file that changed after the grader listed it (a link now); "
                              f"not followed ({err.strerror})") from None
            os.close(fd)
            fd = nxt
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != ids[i]:
                raise Refused("a folder or file that changed after the grader listed it; not read")
        return os.dup(fd)
    finally:
        os.close(fd)


def _find(paths: Sequence[str], exercises: Sequence[str] = (),
          refused: list[tuple[Path, str, str]] | None = None) -> list[tuple[Path, str]]:
    """(notebook, student) for every notebook under ``paths``; nbgrader's submitted/<student>/<assignment>/ understood.

    The submissions are data: links, FIFOs, devices, hard-linked files and nested ``submitted/``
    folders are not graded but listed in ``refused`` as (path, student, why).
    """
    found: list[tuple[Path, str]] = []
    refused = refused if refused is not None else []
    for root in map(Path, paths):
        if root.is_file() and not root.is_symlink():
            found.append((root, _student(root, exercises)))
        elif root.is_dir():
            _walk(root, exercises, found, refused)
        elif root.exists() or root.is_symlink():
            info = os.lstat(root)
            refused.append((root, _student(root, exercises), _kind(info.st_mode, info.st_nlink) or "not a notebook"))
        else:
            raise FileNotFoundError(f"no such notebook or folder: {root}")
    return found


class Refused(Exception):
    """A submission the grader does not read (its reason is the message)."""


_MAX_NOTEBOOK = 64 << 20  # bytes of one submitted notebook


def read_submission(path: Path) -> bytes:
    """The notebook's bytes, read without following a link, and only from a plain file of its own.

    Raises:
        Refused: a link, a FIFO or a device, a hard link, or a file over 64 MiB.
    """
    try:
        if Path(path) in _LOCATED:
            fd = _open_located(Path(path))
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        if os.path.islink(path):
            raise Refused("a symbolic link; links are not followed") from None
        raise Refused(f"cannot be read: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        why = _kind(info.st_mode, info.st_nlink)
        if why:
            raise Refused(why)
        if info.st_size > _MAX_NOTEBOOK:
            raise Refused(f"{info.st_size:,} bytes, over the grader's limit of {_MAX_NOTEBOOK:,} for a notebook")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(_MAX_NOTEBOOK + 1)[:_MAX_NOTEBOOK]
    finally:
        os.close(fd)


def _atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, flush it to disk, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with open(tmp, "w", encoding="utf-8", errors="backslashreplace") as f:
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


def _cell(value: Any) -> str:
    """A CSV cell that a spreadsheet shows as text: a leading =, +, -, @, tab or CR would start a formula."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _row(writer: Any, values: Sequence[Any]) -> None:
    writer.writerow([_cell(v) for v in values])


def duplicates(reports: Sequence[Report]) -> dict[int, str]:
    """For each report (by index) whose student handed in the same exercise more than once, why it is an error."""
    seen: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(reports):
        seen.setdefault((r.student, r.exercise or "?"), []).append(i)
    out: dict[int, str] = {}
    for (student, exercise), rows in seen.items():
        if len(rows) > 1:
            for i in rows:
                out[i] = (f"duplicate: {len(rows)} submissions of {exercise} for student {student!r} "
                          f"({', '.join(reports[j].path for j in rows)}); keep one")
    return out


def _flag_duplicates(reports: Sequence[Report]) -> None:
    for i, why in duplicates(reports).items():
        if not reports[i].error:
            reports[i].error = why


def task_columns(reports: Sequence[Report]) -> dict[tuple[str, str], str]:
    """The task columns of ``grades.csv``: ``{(exercise, grade_id): header}``, by exercise, then task.

    A header says which exercise and task the column scores and out of how many points, e.g.
    ``03 task 2 (/1)``: the same task number is worth different points in different exercises. The
    exercise is named by its number, or in full where two exercises would share one.
    """
    points: dict[tuple[str, str], float] = {}
    for r in reports:
        for t in r.tasks:
            points.setdefault((r.exercise or "", t.grade_id), t.points)
    exercises = sorted({exercise for exercise, _ in points})
    numbers = {e: (re.match(r"\d+(?=_)", e) or re.match(r".*", e)).group() for e in exercises}
    short = {e: numbers[e] if list(numbers.values()).count(numbers[e]) == 1 else e for e in exercises}
    columns: dict[tuple[str, str], str] = {}
    for exercise in exercises:
        for key in [k for k in points if k[0] == exercise]:  # the reference's order of the tasks
            task = key[1].removeprefix("task-")
            columns[key] = f"{short[exercise] or '?'} task {task} (/{number_text(points[key])})"
    return columns


def write_results(reports: Sequence[Report], json_path: Path | None, csv_path: Path | None) -> None:
    """The JSON (every report) and the CSV files: grades (one row per submission) and feedback (one row per lost point)."""
    _flag_duplicates(reports)
    if json_path is not None:
        _atomic(json_path, json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False) + "\n")
    if csv_path is None:
        return
    columns = task_columns(reports)
    grades = io.StringIO()
    writer = csv.writer(grades, lineterminator="\n")
    _row(writer, ["student", "exercise", "notebook", *columns.values(), "total", "max", "error"])
    for r in reports:
        scores = {(r.exercise or "", t.grade_id): number_text(t.score) for t in r.tasks}
        _row(writer, [r.student, r.exercise or "", r.path, *[scores.get(c, "") for c in columns],
                      number_text(r.score), number_text(r.max_score), r.error or ""])
    _atomic(csv_path, grades.getvalue())
    feedback = io.StringIO()
    writer = csv.writer(feedback, lineterminator="\n")
    _row(writer, ["student", "exercise", "task", "title", "score", "points", "reason"])
    for r in reports:
        for t in r.tasks:
            if not t.passed:
                _row(writer, [r.student, r.exercise or "", t.grade_id, t.title, number_text(t.score), number_text(t.points),
                              " ".join(t.message.split())])
    _atomic(feedback_path(csv_path), feedback.getvalue())


def refused_report(path: Path, student: str, why: str, refs: dict[str, dict[str, Any]],
                   exercise: str | None = None) -> Report:
    """The row of a submission the grader would not read: 0 of its exercise's points when the name tells which."""
    from .notebooks import zero_tasks, identify

    name, _ = identify(None, path, refs, exercise)
    report = Report(path=str(path), student=student, exercise=name, error=f"not graded: {why}")
    report.tasks = zero_tasks(refs.get(name) if name else None, report.error)
    return report.clean()


def _grade_one(path: Path, student: str, refs: dict[str, dict[str, Any]], packages: dict[Any, Any],
               options: dict[str, Any]) -> Report:
    """One submission's report, whatever it holds: a refusal or a failure of the grader becomes its error."""
    try:
        data = read_submission(path)
    except Refused as why:
        return _noted(refused_report(path, student, str(why), refs, options.get("exercise")))
    try:
        return _noted(grade_notebook(path, references=refs, package=packages, student=student, data=data, **options))
    except NoSandbox:
        raise
    except Exception as err:  # noqa: BLE001 - one submission never stops the class run
        return _noted(refused_report(path, student, f"the grader failed on it: {type(err).__name__}: {str(err)[:300]}",
                                     refs, options.get("exercise")))


def _noted(report: Report) -> Report:
    """The report, with a note when its student's name may imitate another's."""
    why = look_alike(report.student)
    if why:
        report.notes.append(why)
    return report


def grade_all(items: Sequence[tuple[Path, str]], *, jobs: int = 1, on_report: Callable[[Report], None] | None = None,
              refused: Sequence[tuple[Path, str, str]] = (), **options: Any) -> list[Report]:
    """Grade many notebooks, ``jobs`` at a time; the ``refused`` ones (path, student, why) get a row saying why."""
    from .sandbox import kill_all

    refs = options.pop("references", None) or load_references(options.pop("reference", None))
    packages: dict[Any, Any] = {}  # the sandbox's package copies, one per set of pieces taken out
    lock = threading.Lock()
    reports: list[Report | None] = [None] * len(items)
    for path, student, why in refused:
        report = _noted(refused_report(path, student, why, refs, options.get("exercise")))
        if on_report:
            on_report(report)
        reports.append(report)

    def one(i: int) -> Report:
        path, student = items[i]
        with lock:
            if stopping.is_set():
                raise concurrent.futures.CancelledError
        report = _grade_one(path, student, refs, packages, options)
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
    done = [r for r in reports if r is not None]
    _flag_duplicates(done)
    return done


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
grades.json, grades.csv (one row per submission, one column per task of each exercise, headed
with its points: "03 task 2 (/1)") and grades_feedback.csv (the reason for every lost point)
into --out (default: a grades/ folder beside the submissions folder), updated after every
notebook. Exit status: 0 when every notebook was graded, 1 when one
could not be (unreadable, unknown exercise), 2 for bad arguments.

Example: python -m minitransformer_grader grade submissions/ --jobs 2

Course authors: `python -m minitransformer_grader make-exercises [--check]` regenerates
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
    """``python -m minitransformer_grader [grade] PATH ...`` or ``... make-exercises``: see ``--help``."""
    argv = list(argv if argv is not None else sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):  # a terminal or pipe that cannot show a name gets it escaped
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    if argv[:1] == ["make-exercises"]:
        from .generate import main as make

        return make(argv[1:])
    if argv[:1] == ["grade"]:
        argv = argv[1:]
    parser = argparse.ArgumentParser(prog="python -m minitransformer_grader", description=HELP,
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
    refused: list[tuple[Path, str, str]] = []
    try:
        refs = load_references(args.reference)
        items = _find(args.paths, sorted(refs), refused)
    except FileNotFoundError as err:
        parser.error(str(err))
    except (ValueError, KeyError, TypeError) as err:  # invalid JSON in --reference
        parser.error(f"cannot read the reference exercises in {args.reference}: {type(err).__name__}: {err}")
    if not items and not refused:
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
        from .sandbox import INSTALL_HINT, sandbox_available

        works, why = sandbox_available()
        if not works:
            print(f"python -m minitransformer_grader: error: {why}. Grading runs the students' code: it needs a "
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
                        sandbox=not args.no_sandbox, refused=refused)
    order = {str(p): i for i, (p, _) in enumerate([*items, *((p, s) for p, s, _ in refused)])}
    reports.sort(key=lambda r: order.get(r.path, 0))
    write_results(reports, json_path, csv_path)
    rows = [["submission", "student", "score", ""]]
    rows += [[r.path, r.student, f"{number_text(r.score)}/{number_text(r.max_score)}",
              ("(error: duplicate)" if r.error.startswith("duplicate") else "(error)") if r.error else ""]
             for r in reports]
    print(_table(rows))
    from .limits import mechanism

    errors = sum(1 for r in reports if r.error)
    print(f"graded {len(reports) - errors} of {len(reports)} submissions"
          + (f"; {errors} with an error (see the error column)" if errors else "")
          + f"; limits: {mechanism(args.memory)}, per cell {args.timeout:g} s" + ("" if args.no_sandbox else
                                                                                  ", sandbox: bubblewrap"))
    print(f"wrote {json_path}, {csv_path} and {feedback_path(csv_path)}")
    return 1 if errors else 0
