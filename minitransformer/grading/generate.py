"""Exercise notebooks generated from the solution notebooks: ``python -m minitransformer.grading make-exercises``.

The solutions (``solutions/NN_<lesson>.ipynb``) are the single source, in nbgrader's format:

* a **task cell** (metadata ``nbgrader.solution = true``) holds the learner's stub signature and
  docstring, and the answer between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines. The
  exercise gets ``raise NotImplementedError("Task N: <hint>")`` in its place, indented like the
  ``BEGIN`` line; the hint is a ``### HINT: ...`` line inside the block, else
  ``metadata.minitransformer.hint``. ``### STUB: code`` lines inside the block replace the
  ``raise`` (for answer cells: ``### STUB: answer = None  # "A", "B", ...``);
* a **check cell** (``nbgrader.grade = true``, with ``points``) calls a package check; lines
  between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` are removed from the exercise
  and run only by the grader;
* every other cell is locked; a markdown paragraph that starts with ``> **Solutions.**`` is
  solution-only.

Besides ``exercises/``, the generator writes ``minitransformer/grading/reference/NN_<lesson>.json``:
each check cell in full (hidden tests included), its points and title, and the names the
exercise defines (to recognise a submission by its content). That is what the grader restores
and runs; it ships in the wheel as package data.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["REFERENCE", "clear_solution", "exercise_from_solution", "make_exercises", "reference_from_solution"]

REFERENCE = Path(__file__).resolve().parent / "reference"
_BEGIN, _END = "### BEGIN SOLUTION", "### END SOLUTION"
_HIDDEN_BEGIN, _HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
_BANNER = "> **Solutions.**"
# Metadata of the stored run that an exercise must not carry.
_DROP_CELL_METADATA = ("execution", "collapsed", "scrolled")


def _nbgrader(cell: Any) -> dict[str, Any]:
    info = cell.get("metadata", {}).get("nbgrader")
    return info if isinstance(info, dict) else {}


def _task_number(grade_id: str) -> str:
    match = re.match(r"task-(\w+?)(?:-code)?$", grade_id)
    return match.group(1) if match else grade_id


def _replace_solutions(source: str, task: str, default_hint: str) -> str:
    """The stub: each BEGIN/END SOLUTION block becomes a ``raise`` (or its ``### STUB:`` lines)."""
    lines, out = source.split("\n"), []
    block: list[str] | None = None
    indent = ""
    for line in lines:
        stripped = line.strip()
        if stripped == _BEGIN:
            block, indent = [], line[: len(line) - len(line.lstrip())]
            continue
        if stripped == _END:
            if block is None:
                raise ValueError(f"task {task}: {_END} without {_BEGIN}")
            hints = [ln.strip()[len("### HINT:"):].strip() for ln in block if ln.strip().startswith("### HINT:")]
            stubs = [ln.replace("### STUB: ", "", 1).replace("### STUB:", "", 1)
                     for ln in block if ln.strip().startswith("### STUB:")]
            if stubs:
                out += stubs
            else:
                hint = hints[0] if hints else default_hint
                out.append(f"{indent}raise NotImplementedError({json.dumps(f'Task {task}: {hint}', ensure_ascii=False)})")
            block = None
            continue
        if block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise ValueError(f"task {task}: {_BEGIN} without {_END}")
    return "\n".join(out)


def _remove_hidden(source: str) -> str:
    out, hidden = [], False
    for line in source.split("\n"):
        if line.strip() == _HIDDEN_BEGIN:
            hidden = True
        elif line.strip() == _HIDDEN_END:
            hidden = False
        elif not hidden:
            out.append(line)
    return "\n".join(out).rstrip("\n")


def _without_banner(markdown: str) -> str:
    paragraphs = re.split(r"\n\s*\n", markdown)
    return "\n\n".join(p for p in paragraphs if not p.lstrip().startswith(_BANNER))


def clear_solution(cell: Any) -> bool:
    """Turn one cell's answers into the learner's stubs in place; return whether the cell changed.

    A task cell's ``BEGIN/END SOLUTION`` blocks become their ``raise NotImplementedError("Task N:
    <hint>")`` (or ``### STUB:`` lines); a markdown cell loses its ``> **Solutions.**`` paragraph.
    Hidden tests are left alone (see :func:`exercise_from_solution`). This is the one definition of
    the stub that both generators use: :func:`exercise_from_solution` and, for ``nbgrader
    generate_assignment``, :class:`minitransformer.grading.nbgrader_plugin.ClearSolutionsWithHints`.
    """
    before = cell.source
    if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
        task = _task_number(str(_nbgrader(cell).get("grade_id", "?")))
        hint = cell.metadata.get("minitransformer", {}).get("hint", "write your code here")
        source = cell.source
        if not any(line.strip() == _BEGIN for line in source.split("\n")):
            source = f"{_BEGIN}\n{source}\n{_END}"  # as in nbgrader: a task cell without a block is all answer
        cell.source = _replace_solutions(source, task, hint)
    elif cell.cell_type == "markdown":
        cell.source = _without_banner(cell.source)
    return cell.source != before


def exercise_from_solution(solution: Any) -> Any:
    """The exercise notebook (an nbformat node) of a solution notebook: stubs, no outputs, no hidden tests."""
    nb = copy.deepcopy(solution)
    for cell in nb.cells:
        for key in _DROP_CELL_METADATA:
            cell.metadata.pop(key, None)
        clear_solution(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if _nbgrader(cell).get("grade"):
                cell.source = _remove_hidden(cell.source)
    nb.metadata.pop("widgets", None)
    return nb


def _defined_names(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def reference_from_solution(solution: Any, name: str) -> dict[str, Any]:
    """What the grader needs of one exercise: its check cells in full and the names its tasks define."""
    tasks, defines = [], []
    for index, cell in enumerate(solution.cells):
        info = _nbgrader(cell)
        if cell.cell_type != "code":
            continue
        if info.get("solution"):
            defines += _defined_names(_replace_solutions(cell.source, "0", ""))
        if info.get("grade"):
            extra = cell.metadata.get("minitransformer", {})
            grade_id = str(info["grade_id"])
            tasks.append({
                "grade_id": grade_id,
                "task": _task_number(grade_id),
                "points": info.get("points", 0),
                "title": extra.get("title", grade_id),
                "parts": extra.get("parts"),
                "source": "\n".join(ln for ln in cell.source.split("\n")
                                    if ln.strip() not in (_HIDDEN_BEGIN, _HIDDEN_END)),
                "visible": _remove_hidden(cell.source),
                "cell": index,
            })
    return {"exercise": name, "source": f"solutions/{name}.ipynb", "tasks": tasks, "defines": sorted(set(defines))}


def _solutions(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def _dump_notebook(nb: Any) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def _dump_json(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def make_exercises(solutions: Path, exercises: Path, reference: Path = REFERENCE, *, check: bool = False) -> list[str]:
    """Write ``exercises/`` and the grader's reference from ``solutions/``; return the files that changed.

    With ``check=True`` nothing is written: the return value lists the files that differ from what
    would be generated (stale or missing), and the exercises or references that have no solution.
    """
    import nbformat

    wanted: dict[Path, str] = {}
    for path in _solutions(solutions):
        solution = nbformat.read(path, as_version=4)
        name = path.stem
        declared = solution.metadata.get("minitransformer", {}).get("exercise")
        if declared != name:
            raise ValueError(f"{path}: metadata minitransformer.exercise is {declared!r}, expected {name!r}")
        wanted[exercises / path.name] = _dump_notebook(exercise_from_solution(solution))
        wanted[reference / f"{name}.json"] = _dump_json(reference_from_solution(solution, name))
    changed = [str(p) for p, text in wanted.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    stale = [p for p in [*exercises.glob("*.ipynb"), *reference.glob("*.json")] if p not in wanted]
    if check:
        return changed + [f"{p} (no solution)" for p in stale]
    for path, text in wanted.items():
        if str(path) in changed:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        path.unlink()
    return changed + [f"{p} (removed)" for p in stale]


def main(argv: list[str] | None = None) -> int:
    """``python -m minitransformer.grading make-exercises [--check]``, from the repository root."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m minitransformer.grading make-exercises",
                                     description="Generate exercises/ and the grader's reference from solutions/.")
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--solutions", type=Path, default=root / "solutions")
    parser.add_argument("--exercises", type=Path, default=root / "exercises")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    if not args.solutions.is_dir():
        parser.error(f"no solutions folder at {args.solutions} (run this from a checkout of the course)")
    changed = make_exercises(args.solutions, args.exercises, args.reference, check=args.check)
    for line in changed:
        print(("out of date: " if args.check else "wrote: ") + line)
    return 1 if args.check and changed else 0
