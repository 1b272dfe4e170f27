"""Grading one notebook: :func:`grade_notebook` (:mod:`.classroom` grades a folder and is the command).

A submission is matched to its exercise (``--exercise``, the notebook's metadata, its file or folder
name, or the names its code defines), then run: the learner's code cells in order in a sandbox
(:mod:`.sandbox`), and the exercise's check cells, hidden tests included, taken from the package's
reference (:mod:`.generate` writes it from the solutions) wherever the submission had them, run in
the grader's own process against the learner's code in the sandbox (:mod:`.remote`). Each task
gets its points from its check: all of them, a share per passing part where the reference gives
``parts``, or 0.
"""

from __future__ import annotations

import ast
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .generate import HIDDEN_BEGIN, HIDDEN_END
from .scan import parse

_MARKERS = (HIDDEN_BEGIN, HIDDEN_END)

__all__ = ["Report", "TaskResult", "grade_notebook", "handed_in_as_another", "identify", "load_references"]

_MAX_CODE = 4 << 20  # characters of code in one notebook: more is refused before the source scan reads it
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Control characters (but newline and tab), bidi overrides and lone surrogates: escaped in every report.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a name that is not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: Any, limit: int = 2000) -> str:
    """``text`` as a report may hold it: control characters, bidi overrides and surrogates escaped, at most
    ``limit`` characters (and a note of how many were cut). Every text from a submission goes through it."""
    text = text if isinstance(text, str) else str(text)
    kept = _UNPRINTABLE.sub(_escape, text[:limit])
    if len(text) <= limit and len(kept) <= limit:
        return kept
    return kept[:limit] + f"… (cut: {len(text):,} characters in all)"


class NoSandbox(RuntimeError):
    """Bubblewrap cannot make a sandbox here: nothing can be graded (not a fault of one submission)."""


@dataclass
class TaskResult:
    """The outcome of one graded task (one check cell)."""

    grade_id: str
    title: str
    points: float
    score: float
    message: str

    @property
    def passed(self) -> bool:
        return self.score >= self.points


@dataclass
class Report:
    """The grade of one notebook: one :class:`TaskResult` per task of its exercise, plus notes and errors."""

    path: str
    student: str = ""
    exercise: str | None = None
    tasks: list[TaskResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    output: str = ""  # what the submission printed, capped (first and last part)
    manual: list[dict[str, Any]] = field(default_factory=list)  # written answers graded by hand: not in the score

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tasks)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tasks)

    def table(self, width: int = 72) -> str:
        """A plain-text table (task, title, points, message), the total, and the full messages of the lost points."""
        def cut(text: str) -> str:
            line = " ".join(text.split())
            return line if len(line) <= width else line[: width - 1] + "…"

        rows = [(t.grade_id, t.title, f"{number_text(t.score)}/{number_text(t.points)}", cut(t.message)) for t in self.tasks]
        head = ("task", "title", "points", "message")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
        lines = [f"{self.path}  student {self.student}, exercise {self.exercise or '?'}  ({self.seconds:.1f} s)"]
        for row in [head, *rows]:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
        lines.append("  " + "total".ljust(widths[0] + widths[1] + 2) + f"  {number_text(self.score)}/{number_text(self.max_score)}")
        for m in self.manual:
            lines.append(f"  {m['grade_id']}  {m['title']}: {number_text(float(m['points']))} points graded by hand "
                         "(nbgrader's manual grading), not in this total")
        for t in self.tasks:
            if not t.passed and len(" ".join(t.message.split())) > width:
                lines.append(f"  {t.grade_id}: " + " ".join(t.message.split()))
        lines += [f"  note: {n}" for n in self.notes]
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    def clean(self) -> Report:
        """Every text made printable and bounded (:func:`printable`): a report then survives any string."""
        self.path, self.student = printable(self.path, 1000), printable(self.student, 200)
        self.error = printable(self.error) if self.error else self.error
        self.notes = [printable(n, 1000) for n in self.notes[:40]]
        self.output = printable(self.output, 40_000)
        for t in self.tasks:
            t.grade_id, t.title, t.message = printable(t.grade_id, 100), printable(t.title, 200), printable(t.message)
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the JSON file."""
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score)
        for task, result in zip(data["tasks"], self.tasks):
            task["passed"] = result.passed
        return data


def number_text(x: float) -> str:
    return f"{x:g}"


# ------------------------------------------------------------------------------------------------
# The reference exercises
# ------------------------------------------------------------------------------------------------

def load_references(folder: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The reference of every exercise (``reference/*.json`` of the package, or of ``folder``), read into memory.

    Raises:
        FileNotFoundError: there is none; the grader refuses to trust a submission's own check cells.
    """
    if folder is None:
        from importlib import resources

        files = [f for f in resources.files("minitransformer_grader").joinpath("reference").iterdir()
                 if f.name.endswith(".json")] if resources.files("minitransformer_grader").joinpath(
                     "reference").is_dir() else []
    else:
        files = sorted(Path(folder).glob("*.json"))
    refs = {}
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        refs[data["exercise"]] = data
    if not refs:
        where = folder or "minitransformer_grader/reference/ in the installed grader"
        raise FileNotFoundError(f"no reference exercises found in {where}: the grader will not grade with the "
                                "submissions' own check cells. Reinstall the grader, or run "
                                "`python -m minitransformer_grader make-exercises` in a checkout of the course.")
    return refs


def _defined(nb: Any) -> set[str]:
    names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = parse("\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            names |= set(re.findall(r"^(?:def|class)\s+(\w+)", cell.source, flags=re.M))
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def identify(nb: Any | None, path: Path, refs: dict[str, dict[str, Any]], exercise: str | None = None) -> tuple[str | None, str]:
    """(exercise name or None, how it was found): option, file or folder name, metadata, or content.

    The name the notebook was handed in under comes before what the notebook says of itself, which
    :func:`handed_in_as_another` compares with it.
    """
    if exercise:
        return (exercise, "--exercise") if exercise in refs else (None, f"unknown exercise {exercise!r}")
    for part in [path.stem, *reversed(path.parent.parts)]:  # the layout the instructor collected first
        if part in refs:
            return part, "name"
    if nb is not None:
        for declared in (_field(nb, "metadata", "minitransformer", "exercise"), _field(nb, "metadata", "grading", "exercise")):
            if isinstance(declared, str) and declared in refs:
                return declared, "metadata"
    if nb is not None:
        names = _defined(nb)
        scored = sorted(((len(names & set(r["defines"])), n) for n, r in refs.items()), reverse=True)
        if scored and scored[0][0] > 0 and (len(scored) == 1 or scored[0][0] > scored[1][0]):
            return scored[0][1], "content"
    return None, "not found"


def handed_in_as_another(nb: Any, name: str, refs: dict[str, dict[str, Any]]) -> str | None:
    """Why a notebook handed in under exercise ``name`` is another exercise's (None when it is not).

    Its metadata names another exercise, or it defines none of the names ``name`` asks for and most of
    another's: a solved exercise 00 renamed 03_self_attention.ipynb.
    """
    for declared in (_field(nb, "metadata", "minitransformer", "exercise"), _field(nb, "metadata", "grading", "exercise")):
        if isinstance(declared, str) and declared in refs and declared != name:
            return f"handed in as {name}, but the notebook is exercise {declared} (its metadata)"
    names = _defined(nb)
    if names & set(refs[name].get("defines", ())):
        return None
    for other, ref in sorted(refs.items()):
        wanted = set(ref.get("defines", ()))
        if other != name and wanted and len(names & wanted) * 2 > len(wanted):
            return f"handed in as {name}, but the notebook defines exercise {other}'s functions and none of {name}'s"
    return None


# ------------------------------------------------------------------------------------------------
# One notebook
# ------------------------------------------------------------------------------------------------

def _field(node: Any, *keys: str) -> Any:
    """``node[k1][k2]...``, or None where a level is missing or not a mapping (metadata is the submission's)."""
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _grade_id(cell: Any) -> str | None:
    """The check cell's grade id (nbgrader's, or the older ``grading`` metadata); None unless it is a string."""
    if _field(cell, "metadata", "nbgrader", "grade"):
        grade_id = _field(cell, "metadata", "nbgrader", "grade_id")
    else:
        grade_id = _field(cell, "metadata", "grading", "grade_id")
    return grade_id if isinstance(grade_id, str) else None


def _plan(nb: Any, ref: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    """The cells to run: the learner's code cells, and the reference check cells where the submission had them."""
    tasks = {t["grade_id"]: t for t in ref["tasks"]}
    cells: list[dict[str, Any]] = []
    placed: set[str] = set()
    code_number = 0
    # A check cell that appears twice (copied above its function, say) runs where it appears last.
    last = {_grade_id(c): i for i, c in enumerate(nb.cells) if c.cell_type == "code" and _grade_id(c) in tasks}
    for position, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code_number += 1
        grade_id = _grade_id(cell)
        if grade_id in tasks and last[grade_id] != position:
            notes.append(f"check cell {grade_id} appears more than once; only its last copy was run")
            continue
        if grade_id in tasks and grade_id not in placed:
            task = tasks[grade_id]
            plain = "\n".join(ln for ln in cell.source.split("\n") if ln.strip() not in _MARKERS)
            if plain.strip() not in (task["source"].strip(), task.get("visible", "").strip()):
                notes.append(f"check cell {grade_id} was edited; the original was run")
            cells.append({"kind": "check", "grade_id": grade_id, "source": task["source"]})
            placed.add(grade_id)
            continue
        if grade_id is not None:
            notes.append(f"check cell {grade_id!r} is not part of exercise {ref['exercise']}; not run")
            continue
        cells.append({"kind": "code", "source": cell.source, "number": code_number})
    for grade_id, task in tasks.items():
        if grade_id not in placed:
            notes.append(f"check cell {grade_id} was missing; the original was run at the end")
            cells.append({"kind": "check", "grade_id": grade_id, "source": task["source"]})
    return cells


def zero_tasks(ref: dict[str, Any] | None, message: str) -> list[TaskResult]:
    return [TaskResult(t["grade_id"], t["title"], float(t["points"]), 0.0, message) for t in (ref or {}).get("tasks", [])]


def grade_notebook(path: str | Path, *, exercise: str | None = None, timeout: float = 120.0,
                   notebook_timeout: float = 900.0, memory_mb: int = 4096,
                   references: dict[str, dict[str, Any]] | None = None, package: Any = None,
                   student: str | None = None, data: bytes | None = None, sandbox: bool | None = None) -> Report:
    """Run one submitted notebook in a sandbox and score every task of its exercise with the grader's own checks.

    Args:
        path: the notebook (only read).
        exercise: the exercise's name; by default found from the metadata, the file or folder name, or the content.
        timeout: seconds allowed for each cell (finite, > 0).
        notebook_timeout: seconds allowed for the whole notebook (finite, > 0).
        memory_mb: address-space limit of the submission's processes, in MiB (0: none).
        references: from :func:`load_references` (read once for many notebooks).
        package: a dict in which to keep the sandbox's package copies (one per set of poisoned pieces) for
            many notebooks; the caller removes them. None: made and removed here.
        student: the student's name for the report (default: the file name).
        data: the notebook's bytes, if already read.
        sandbox: True: bubblewrap; False: a plain process with the instructor's rights; None: bubblewrap,
            or a RuntimeError that says how to install it.

    Returns:
        A :class:`Report`. A notebook that cannot be read or matched gets an ``error`` and 0 of the
        exercise's points (when the exercise is known).
    """
    import nbformat

    from .sandbox import INSTALL_HINT, KernelPackage, sandbox_available
    from .remote import check_functions
    from .submission import run_submission

    check_limits(timeout, notebook_timeout)
    if sandbox is None:
        works, why = sandbox_available()
        if not works:
            raise NoSandbox(f"cannot grade in a sandbox: {why}. To grade untrusted code, {INSTALL_HINT}.")
        sandbox = True
    path = Path(path)
    refs = references if references is not None else load_references()
    report = Report(path=str(path), student=student or path.stem)
    start = time.perf_counter()
    nb = None
    raw = None
    try:
        raw = data if data is not None else path.read_bytes()
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as err:
        report.error = f"cannot read the notebook: {type(err).__name__}: {str(err)[:200]}"
    name, how = identify(nb, path, refs, exercise)
    report.exercise = name
    ref = refs.get(name) if name else None
    if ref is None:
        report.error = report.error or f"cannot tell which exercise this is ({how}): name it with --exercise"
    elif how == "name" and nb is not None:
        other = handed_in_as_another(nb, name, refs)  # type: ignore[arg-type]
        if other:
            report.error = f"not graded: {other}; hand it in under its own exercise's name"
    if report.error:
        report.tasks = zero_tasks(ref, report.error)
        report.seconds = time.perf_counter() - start
        return report.clean()
    assert nb is not None and ref is not None
    report.manual = [dict(m) for m in ref.get("manual", [])]
    if how == "content":
        report.notes.append(f"matched to exercise {name} by the names it defines")
    cells = _plan(nb, ref, report.notes)
    size = sum(len(c["source"]) for c in cells if c["kind"] == "code")
    if size > _MAX_CODE:  # the grader's own source scan stays bounded in memory and time
        report.error = f"not graded: {size:,} characters of code, over the grader's limit of {_MAX_CODE:,}"
        report.tasks = zero_tasks(ref, report.error)
        return report.clean()
    checks = check_functions()
    _scan_sources(cells, checks)
    taken = _taken_out(cells, ref, checks)
    packages = package if isinstance(package, dict) else {}
    key = tuple(sorted(taken.items()))
    if key not in packages:
        packages[key] = KernelPackage(taken, sorted(checks))
    copy = packages[key]
    try:
        run = run_submission(cells, copy, notebook=raw, sandbox=sandbox, cell_timeout=timeout,
                             notebook_timeout=notebook_timeout, memory_mb=memory_mb, checks=checks)
        if not copy.intact():
            report.error = "the submission changed the grader's copy of the package; its grade is void"
    finally:
        if not isinstance(package, dict):
            for made in packages.values():
                made.remove()
    report.output = run.output
    if run.output_cut:
        report.notes.append("the submission printed more than the grader keeps; its output was cut in the middle")
    report.tasks = _score(cells, ref, run, timeout, notebook_timeout, report)
    if report.error:
        for t in report.tasks:
            t.score = 0.0
    report.seconds = time.perf_counter() - start
    return report.clean()


def _scan_sources(cells: list[dict[str, Any]], checks: dict[str, Any]) -> None:
    """Mark each check cell whose task's code, as submitted, names the piece it forbids (see :mod:`.scan`)."""
    from .remote import avoided
    from .scan import parse_cells, smuggled

    code = parse_cells([c["source"] for c in cells if c["kind"] == "code"])
    for cell in cells:
        if cell["kind"] == "check":
            cell["smuggled"] = smuggled(code, cell["source"], checks, avoided(cell["source"], checks))


def _taken_out(cells: list[dict[str, Any]], ref: dict[str, Any], checks: dict[str, Any]) -> dict[str, str]:
    """The package functions the exercise's tasks ask the learner to write, each with the task that asks for it."""
    from .remote import is_package_function, avoided

    taken: dict[str, str] = {}
    for cell in cells:
        if cell["kind"] == "check":
            for target in avoided(cell["source"], checks):
                if is_package_function(target):
                    taken.setdefault(target, f"task {cell['grade_id']} of exercise {ref['exercise']}")
    return taken


def check_limits(timeout: float, notebook_timeout: float) -> None:
    """Raise ValueError unless both time limits are finite numbers of seconds > 0."""
    import math

    for name, value in (("timeout", timeout), ("notebook_timeout", notebook_timeout)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a finite number of seconds > 0 (the code is untrusted: a limit is "
                             f"needed); got {value!r}")


def _score(cells: list[dict[str, Any]], ref: dict[str, Any], run: Any, timeout: float,
           notebook_timeout: float, report: Report) -> list[TaskResult]:
    stopped = ""
    if run.notebook_timeout:
        stopped = f"not run: the notebook ran for more than {notebook_timeout:g} s and was stopped"
        report.notes.append(stopped)
    elif run.crash:
        stopped = f"not run: the grader's runner failed ({run.crash.get('ename')}: {run.crash.get('evalue')})"
        report.notes.append(stopped)
    elif not run.ended and run.limit_hit:
        stopped = f"not run: the submission was stopped because {run.limit_hit}"
        report.notes.append(stopped)
    elif not run.ended:
        why = run.gone or ("a cell ignored the interrupt after its time limit" if run.timed_out_cells else
                           "the submission's process died" + (" (out of memory?)" if "MemoryError" in run.output else ""))
        stopped = f"not run: {why}"
        report.notes.append(stopped)
    elif run.limit_hit:  # it ran to its end, but a process it started was killed, or a fork refused, at a limit
        report.notes.append(f"the submission ran to its end, but {run.limit_hit}: a process it started was "
                            "stopped or refused there, so the checks saw only what the rest computed")
    syntax = ""
    results = []
    by_id = {c["grade_id"]: i for i, c in enumerate(cells) if c["kind"] == "check"}
    for index, cell in enumerate(cells):
        event = run.events.get(index)
        if cell["kind"] == "code" and event and event.get("error") and event["error"]["ename"] in ("SyntaxError", "IndentationError") \
                and not syntax:
            e = event["error"]
            first = cell["source"].strip().split("\n")[0][:50]
            syntax = (f"{e['ename']} in code cell {cell['number']} (`{first}`), line {e.get('lineno')}: "
                      f"{e['evalue']}; that cell did not run")
        if cell["kind"] == "code" and index in run.timed_out_cells:
            report.notes.append(f"code cell {cell['number']} ran for more than {timeout:g} s and was interrupted")
    for task in ref["tasks"]:
        index = by_id[task["grade_id"]]
        event = run.events.get(index)
        points = float(task["points"])
        if event is None:
            message = (f"timed out: the check ran for more than {timeout:g} s" if index in run.timed_out_cells
                       else stopped or "not run")
            results.append(TaskResult(task["grade_id"], task["title"], points, 0.0, message))
            continue
        parts = event.get("parts", [])
        if cells[index].get("smuggled"):
            results.append(TaskResult(task["grade_id"], task["title"], points, 0.0, cells[index]["smuggled"]))
            continue
        weights = task.get("parts") or None
        if weights and len(weights) == len(parts):
            score = sum(float(w) for w, p in zip(weights, parts) if p["passed"])
        else:
            score = points if parts and all(p["passed"] for p in parts) else 0.0
        failed = [p for p in parts if not p["passed"]]
        if not failed:
            message = parts[0]["message"] if parts else "passed"
        else:
            message = _ANSI.sub("", failed[0]["message"])
            if failed[0].get("gone"):
                message = failed[0]["message"]
            elif failed[0].get("timeout"):
                message = f"timed out: the check ran for more than {timeout:g} s and was interrupted"
            elif syntax and not failed[0].get("flagged") and re.match(r"(NameError|NotImplementedError)", message):
                message = f"{syntax} ({message})"
            if weights and len(weights) == len(parts) and score > 0:
                message = f"{number_text(score)} of {number_text(points)} points; part {parts.index(failed[0]) + 1} failed: {message}"
        results.append(TaskResult(task["grade_id"], task["title"], points, min(score, points), message))
    return results
