"""Grading whole notebooks: :func:`grade_notebook` and the command ``python -m minitransformer.grading``.

Each submission runs in a fresh kernel after its check cells have been restored from the original
exercise (:data:`COURSE_EXERCISES`, or ``--reference``); the result is a :class:`Report`, one
:class:`TaskResult` per check cell.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import functools
import json
import multiprocessing
import re
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

__all__ = ["COURSE_EXERCISES", "Report", "TaskResult", "grade_notebook", "main"]

# The original exercises, used to restore check cells that a submission changed or deleted
# (this file is minitransformer/grading/notebooks.py; the exercises sit beside the package).
COURSE_EXERCISES = Path(__file__).resolve().parents[2] / "exercises"


@dataclass
class TaskResult:
    """The outcome of one graded check cell."""

    grade_id: str
    title: str
    points: float
    passed: bool
    message: str

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0


@dataclass
class Report:
    """The grade of one notebook: one :class:`TaskResult` per check cell, plus notes and errors."""

    path: str
    tasks: list[TaskResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tasks)

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tasks)

    def table(self, width: int = 72) -> str:
        """A plain-text table (task, title, points, passed, message), the total, then the full messages
        of the failed tasks whose message did not fit in ``width`` characters."""
        def cut(text: str) -> str:
            line = " ".join(text.split())
            return line if len(line) <= width else line[: width - 1] + "…"

        rows = [(t.grade_id, t.title, f"{_num(t.score)}/{_num(t.points)}", "yes" if t.passed else "no",
                 cut(t.message)) for t in self.tasks]
        head = ("task", "title", "points", "passed", "message")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
        lines = [f"{self.path}  ({self.seconds:.1f} s)"]
        for row in [head, *rows]:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
        total = f"{_num(self.score)}/{_num(self.max_score)}"
        lines.append("  " + "total".ljust(widths[0] + widths[1] + 2) + "  " + total)
        for t in self.tasks:
            if not t.passed and len(" ".join(t.message.split())) > width:
                lines.append(textwrap.fill(" ".join(t.message.split()), width=100, initial_indent=f"  {t.grade_id}: ",
                                           subsequent_indent=" " * (len(t.grade_id) + 4), break_on_hyphens=False))
        lines += [f"  note: {n}" for n in self.notes]
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score)
        for task, result in zip(data["tasks"], self.tasks):
            task["score"] = result.score
        return data


def _num(x: float) -> str:
    return f"{x:g}"


def _grading(cell: Any) -> dict[str, Any] | None:
    info = cell.get("metadata", {}).get("grading")
    return info if isinstance(info, dict) and "grade_id" in info else None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _find_reference(nb: Any, path: Path, reference: Path | None) -> Path | None:
    name = nb.get("metadata", {}).get("grading", {}).get("exercise") or path.stem
    folder = reference if reference is not None else COURSE_EXERCISES
    candidate = folder / f"{name}.ipynb"
    return candidate if candidate.is_file() else None


def _identifiers(source: str) -> set[str]:
    """Names, attributes and imported names in a code cell; words in strings and comments do not count."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:  # a learner's broken cell: fall back to every word outside comments
        return set(re.findall(r"\w+", re.sub(r"#.*", "", source)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
    return names


def _package_uses(nb: Any) -> list[str]:
    """Notes for the instructor: code that uses the package's version of what a task asks for.

    Each check cell lists those names in ``metadata["grading"]["avoid"]``.
    """
    used_names: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and _grading(cell) is None:
            used_names |= _identifiers(cell.source)
    notes = []
    for cell in nb.cells:
        info = _grading(cell)
        if info is None:
            continue
        used = [name for name in info.get("avoid", []) if name in used_names]
        if used:
            notes.append(f"{info['grade_id']}: the code uses {', '.join(used)}, the package's own version of "
                         "what this task asks for")
    return notes


def _kernel_for(nb: Any) -> str:
    """The notebook's own kernel when it is installed here, else the default ``python3``."""
    from jupyter_client.kernelspec import KernelSpecManager

    wanted = nb.get("metadata", {}).get("kernelspec", {}).get("name", "python3")
    return wanted if wanted in KernelSpecManager().find_kernel_specs() else "python3"


def grade_notebook(path: str | Path, *, timeout: float = 120.0, reference: str | Path | None = None,
                   kernel_name: str | None = None) -> Report:
    """Execute an exercise notebook in a fresh kernel and score its check cells.

    A check cell carries ``metadata["grading"] = {"grade_id": "task-1", "task": 1, "points": 2, "title": ...}``.
    When the original exercise can be found (``reference``, a folder, or the course's ``exercises/``;
    matched by the notebook's ``metadata["grading"]["exercise"]`` or its file name), its check cells
    replace the submission's (edited ones are restored, deleted ones appended) and its points count.
    A task passes when its check cell runs without an error and prints ``✓ Task N passed``. Code
    that names the package's version of a task's piece (the check cell's ``"avoid"`` list) is
    reported in the notes, for the instructor to look at; it costs no points by itself.

    Args:
        path: the notebook to grade; it is not modified.
        timeout: seconds allowed for each cell.
        reference: folder holding the original exercise notebooks.
        kernel_name: Jupyter kernel to run; defaults to the notebook's own.

    Returns:
        A :class:`Report`; a notebook that cannot be read or run gets an ``error`` and 0 points.
    """
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as err:  # pragma: no cover - both come with the dev and notebooks extras
        raise ImportError("grading needs nbformat and nbclient: pip install -e '.[dev]'") from err

    path = Path(path)
    report = Report(path=str(path))
    start = time.perf_counter()
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:
        report.error = f"cannot read the notebook: {type(err).__name__}: {err}"
        return report

    ref_path = _find_reference(nb, path, Path(reference) if reference is not None else None)
    if ref_path is not None:
        ref_nb = nbformat.read(ref_path, as_version=4)
        originals = {info["grade_id"]: c for c in ref_nb.cells if (info := _grading(c))}
        seen = set()
        for cell in nb.cells:
            info = _grading(cell)
            if info is None:
                continue
            original = originals.get(info["grade_id"])
            if original is None:
                cell.metadata.pop("grading")  # not a task of this exercise: runs, but is not graded
                report.notes.append(f"check cell {info['grade_id']!r} is not part of {ref_path.name}; not graded")
                continue
            seen.add(info["grade_id"])
            if cell.source != original.source:
                report.notes.append(f"check cell {info['grade_id']} was edited; the original was restored")
            cell.source, cell.metadata["grading"] = original.source, dict(original.metadata["grading"])
        for grade_id, original in originals.items():
            if grade_id not in seen:
                report.notes.append(f"check cell {grade_id} was missing; the original was added at the end")
                nb.cells.append(copy.deepcopy(original))
    else:
        report.notes.append("original exercise not found: the submission's own check cells were graded")

    checks = [c for c in nb.cells if _grading(c)]
    if not checks:
        report.error = "no check cells (cells with metadata 'grading') found"
        report.seconds = time.perf_counter() - start
        return report
    report.notes += _package_uses(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client_kwargs: dict[str, Any] = dict(timeout=timeout, allow_errors=True, interrupt_on_timeout=True,
                                         shutdown_kernel="immediate",
                                         resources={"metadata": {"path": str(path.resolve().parent)}})
    client_kwargs["kernel_name"] = kernel_name or _kernel_for(nb)
    try:
        NotebookClient(nb, **client_kwargs).execute()
    except Exception as err:  # the kernel died or could not start: the cells not run score 0
        report.error = f"execution stopped: {type(err).__name__}: {_ANSI.sub('', str(err)).strip()[:300]}"

    for cell in checks:
        info = _grading(cell)
        assert info is not None
        task = info.get("task", info["grade_id"].removeprefix("task-"))
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        if errors and errors[0].get("ename") == "KeyboardInterrupt":
            message, passed = f"timed out: the cell ran for more than {timeout:g} s and was interrupted", False
        elif errors:
            message = _ANSI.sub("", f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}")
            passed = False
        elif cell.get("execution_count") is None:
            message, passed = "not run" + (f" ({report.error})" if report.error else ""), False
        elif f"✓ Task {task} passed" in text:
            message, passed = next((ln for ln in text.splitlines() if ln.startswith("✓")), ""), True
        else:
            message, passed = "the check did not report success", False
        report.tasks.append(TaskResult(grade_id=info["grade_id"], title=str(info.get("title", "")),
                                       points=float(info.get("points", 1)), passed=passed, message=message))
    report.seconds = time.perf_counter() - start
    return report


def _notebooks(paths: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        elif p.is_file():
            found.append(p)
        else:
            raise FileNotFoundError(f"no such notebook or folder: {p}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m minitransformer.grading NOTEBOOK_OR_FOLDER ... [--json out.json]``: grade and print tables."""
    parser = argparse.ArgumentParser(
        prog="python -m minitransformer.grading",
        description="Run exercise notebooks in fresh kernels and score their check cells.",
    )
    parser.add_argument("paths", nargs="+", help="submitted notebooks, or folders searched for *.ipynb")
    parser.add_argument("--json", type=Path, help="also write every report to this JSON file")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per cell (default 120)")
    parser.add_argument("--reference", type=Path, default=None,
                        help=f"folder with the original exercises (default {COURSE_EXERCISES})")
    parser.add_argument("--kernel", default=None, help="Jupyter kernel name (default: the notebook's own)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at the same time (default 1)")
    args = parser.parse_args(argv)
    try:
        files = _notebooks(args.paths)
    except FileNotFoundError as err:
        parser.error(str(err))
    if not files:
        parser.error("no notebooks found")
    grade = functools.partial(grade_notebook, timeout=args.timeout, reference=args.reference,
                              kernel_name=args.kernel)
    reports = []
    if args.jobs > 1 and len(files) > 1:
        # Separate processes, each starting its own kernels; results are printed in the given order.
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(min(args.jobs, len(files)), mp_context=context) as pool:
            for report in pool.map(grade, files):
                reports.append(report)
                print(report.table(), end="\n\n", flush=True)
    else:
        for path in files:
            reports.append(grade(path))
            print(reports[-1].table(), end="\n\n", flush=True)
    if len(reports) > 1:
        width = max(len(r.path) for r in reports)
        print("submission".ljust(width) + "  score")
        for r in reports:
            print(r.path.ljust(width) + f"  {_num(r.score)}/{_num(r.max_score)}" + ("  (error)" if r.error else ""))
    if args.json:
        args.json.write_text(json.dumps([r.to_dict() for r in reports], indent=2, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return 0
