"""Exercise notebooks generated from the solution notebooks: ``python -m minitransformer_grader make-exercises``.

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
* a **written answer graded by hand** is a markdown cell with ``nbgrader.solution`` and
  ``nbgrader.grade`` (nbgrader's manually graded answer, with ``points``): its ``### STUB:`` lines
  (else nbgrader's ``YOUR ANSWER HERE``) replace its solution block, and the reference lists it under
  ``manual``, so that the grader names its points as graded by hand instead of giving or taking them;
* every other cell is locked; a markdown paragraph that starts with ``> **Solutions.**`` is
  solution-only.

Besides ``exercises/``, the generator writes ``grader/minitransformer_grader/reference/NN_<lesson>.json``:
each check cell in full (hidden tests included), its points and title, and the names the
exercise defines (to recognise a submission by its content). That is what the grader restores
and runs; it ships in the grader's wheel as package data.

It also writes the example class of ``examples/class/submitted/`` (:func:`example_class`): three
submissions of exercise 03 in nbgrader's layout, made from the exercise and the solution, which
an instructor can grade to see what the grader writes (``examples/class/grades/``).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLE_CLASS", "REFERENCE", "clear_solution", "example_class", "exercise_from_solution", "make_exercises",
           "reference_from_solution"]

REFERENCE = Path(__file__).resolve().parent / "reference"
_BEGIN, _END = "### BEGIN SOLUTION", "### END SOLUTION"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
_BANNER = "> **Solutions.**"
#: The stub of a written answer graded by hand that names none (nbgrader's ``ClearSolutions.text_stub``).
MANUAL_STUB = "YOUR ANSWER HERE"
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
        if line.strip() == HIDDEN_BEGIN:
            hidden = True
        elif line.strip() == HIDDEN_END:
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
    generate_assignment``, :class:`minitransformer_grader.nbgrader_plugin.ClearSolutionsWithHints`.
    """
    before = cell.source
    if cell.cell_type == "markdown" and _nbgrader(cell).get("solution"):
        # A written answer graded by hand (nbgrader's "manually graded answer"): its ``### STUB:`` lines, else
        # nbgrader's own text stub, replace the solution block.
        source = cell.source
        if not any(line.strip() == _BEGIN for line in source.split("\n")):
            source = f"{_BEGIN}\n{source}\n{_END}"
        if not any(line.strip().startswith("### STUB:") for line in source.split("\n")):
            source = source.replace(_END, f"### STUB: {MANUAL_STUB}\n{_END}", 1)
        cell.source = _without_banner(_replace_solutions(source, "?", ""))
    elif cell.cell_type == "code" and _nbgrader(cell).get("solution"):
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


def _answer(source: str) -> str:
    """A task cell's source as a learner who solved it would leave it: the solution, without the markers."""
    markers = (_BEGIN, _END, "### HINT:", "### STUB:")
    return "\n".join(ln for ln in source.split("\n") if not ln.strip().startswith(markers))


def _answered(solution: Any, answers: dict[str, tuple[tuple[str, str], ...] | None]) -> Any:
    """The exercise of ``solution`` with the task cells named in ``answers`` filled in with the solution's answer.

    ``answers`` maps a task cell's grade id to the edits (old text, new text) that turn the solution's
    answer into the learner's (none: the answer as it is); a task cell not named keeps its stub.
    """
    nb = exercise_from_solution(solution)
    for cell, original in zip(nb.cells, solution.cells):
        grade_id = str(_nbgrader(original).get("grade_id", ""))
        if cell.cell_type != "code" or not _nbgrader(original).get("solution") or grade_id not in answers:
            continue
        source = _answer(original.source)
        for old, new in answers[grade_id] or ():
            if source.count(old) != 1:
                raise ValueError(f"example class: {grade_id} of the solution no longer holds {old!r} once; "
                                 "update EXAMPLE_CLASS in grader/minitransformer_grader/generate.py")
            source = source.replace(old, new)
        cell.source = source
    return nb


# The example class (examples/class/submitted/<student>/<exercise>/<exercise>.ipynb): who handed in what.
EXAMPLE_EXERCISE = "03_self_attention"
EXAMPLE_CLASS: dict[str, dict[str, tuple[tuple[str, str], ...] | None]] = {
    "blank": {},  # the exercise as released
    "partly-done": {  # tasks 1 and 2 right, the question unanswered, and the softmax of task 4 as written
        "task-1-code": None,
        "task-2-code": None,
        "task-4-code": (("return torch.exp(x - my_logsumexp(x, dim).unsqueeze(dim))  # the shape of x",
                         "return torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)"),),
    },
    "worked-solution": {"task-1-code": None, "task-2-code": None, "task-3-code": None, "task-4-code": None,
                        "task-5-find": None, "task-5-code": None, "task-6-code": None, "task-7-code": None,
                        "predict-padding": None, "predict-overflow": None},
}


def example_class(solution: Any) -> dict[str, Any]:
    """The example class's submissions of the solution's exercise: ``{"<student>/<exercise>/<exercise>.ipynb": notebook}``.

    Each is the exercise as a learner hands it in, made from the solution by :data:`EXAMPLE_CLASS`: a
    blank one, a partly done one with a usual mistake, and one with every task solved.
    """
    name = solution.metadata["minitransformer"]["exercise"]
    return {f"{student}/{name}/{name}.ipynb": _answered(solution, answers) for student, answers in EXAMPLE_CLASS.items()}


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
                                    if ln.strip() not in (HIDDEN_BEGIN, HIDDEN_END)),
                "visible": _remove_hidden(cell.source),
                "cell": index,
            })
    reference = {"exercise": name, "source": f"solutions/{name}.ipynb", "tasks": tasks, "defines": sorted(set(defines))}
    manual = [{"grade_id": str(_nbgrader(c)["grade_id"]), "task": _task_number(str(_nbgrader(c)["grade_id"])),
               "points": _nbgrader(c).get("points", 0), "title": c.metadata.get("minitransformer", {}).get("title", "")}
              for c in solution.cells if c.cell_type == "markdown" and _nbgrader(c).get("grade")]
    if manual:  # written answers graded by hand: listed in the reports, neither given nor taken by the grader
        reference["manual"] = manual
    return reference


def _solutions(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def _dump_notebook(nb: Any) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def _dump_json(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def make_exercises(solutions: Path, exercises: Path, reference: Path = REFERENCE, *, check: bool = False,
                   example: Path | None = None) -> list[str]:
    """Write ``exercises/`` and the grader's reference from ``solutions/``; return the files that changed.

    With ``example`` (a folder, ``examples/class/submitted``), also the example class's submissions
    (:func:`example_class`). With ``check=True`` nothing is written: the return value lists the files
    that differ from what would be generated (stale or missing), and the exercises, references or
    example submissions that have no solution.
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
        if example is not None and name == EXAMPLE_EXERCISE:
            for relative, notebook in example_class(solution).items():
                wanted[example / relative] = _dump_notebook(notebook)
    changed = [str(p) for p, text in wanted.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    examples = sorted(example.rglob("*.ipynb")) if example is not None else []
    stale = [p for p in [*exercises.glob("*.ipynb"), *reference.glob("*.json"), *examples] if p not in wanted]
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
    """``python -m minitransformer_grader make-exercises [--check]``, in a checkout of the course."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m minitransformer_grader make-exercises",
                                     description="Generate exercises/ and the grader's reference from solutions/.")
    root = Path(__file__).resolve().parents[2]  # the checkout: grader/minitransformer_grader/generate.py
    parser.add_argument("--solutions", type=Path, default=root / "solutions")
    parser.add_argument("--exercises", type=Path, default=root / "exercises")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--example-class", type=Path, default=root / "examples" / "class" / "submitted",
                        help="folder of the example class's submissions (default examples/class/submitted)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    if not args.solutions.is_dir():
        parser.error(f"no solutions folder at {args.solutions} (run this from a checkout of the course)")
    changed = make_exercises(args.solutions, args.exercises, args.reference, check=args.check,
                             example=args.example_class)
    for line in changed:
        print(("out of date: " if args.check else "wrote: ") + line)
    if not changed:  # say so, rather than nothing at all
        n = len(_solutions(args.solutions))
        print(f"{_shown(args.exercises)}: all {n} exercise{'s' if n != 1 else ''}, the grader's reference and the "
              f"example class {'are' if args.check else 'were already'} up to date")
    return 1 if args.check and changed else 0


def _shown(folder: Path) -> str:
    """``exercises/``: the folder relative to the working directory when it is inside it, else in full."""
    try:
        return f"{folder.resolve().relative_to(Path.cwd().resolve())}/"
    except ValueError:
        return f"{folder}/"
