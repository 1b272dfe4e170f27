"""The exercise generator and the grader (minitransformer_grader).

* the committed exercises and reference are what the generator makes of the solutions, whose
  nbgrader metadata is valid;
* the grading command gives the solutions full marks and the blank exercises 0, and survives the
  hostile submissions (one shared run over a class folder, module-scoped: it starts processes).

The checks themselves are tested without the grader (tests/test_checks.py).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

import minitransformer_grader as G
from minitransformer_grader.generate import exercise_from_solution, make_exercises

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "grader" / "minitransformer_grader" / "reference"
NAMES = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
# Exercise 03 (most of the grading tests below): tasks 1-4 earn 3, 1, 1 and 2 points.
FULL_03 = sum(task["points"] for task in G.load_references()["03_self_attention"]["tasks"])
MINE = ["02_positional_encoding", "03_self_attention", "04_multi_head_attention", "05_add_norm_and_feed_forward",
        "06_decoder_and_masking", "07_training"]


# ----------------------------------------------------------------------------------------------
# The generator and the nbgrader format
# ----------------------------------------------------------------------------------------------

def _read(folder: str, name: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / folder / f"{name}.ipynb", as_version=4)


def test_the_committed_exercises_are_what_the_generator_makes(tmp_path):
    stale = make_exercises(ROOT / "solutions", ROOT / "exercises", REFERENCE, check=True)
    assert stale == [], "run `python -m minitransformer_grader make-exercises`: " + ", ".join(stale)


def test_make_exercises_says_in_one_line_when_nothing_is_out_of_date(tmp_path, capsys, monkeypatch):
    from minitransformer_grader.generate import main as make

    monkeypatch.chdir(tmp_path)
    folders = ["--solutions", str(ROOT / "solutions"), "--exercises", "exercises", "--reference", "reference",
               "--example-class", "class"]
    assert make(folders) == 0 and capsys.readouterr().out.count("wrote: ") == 2 * len(NAMES) + 3
    assert make([*folders, "--check"]) == 0
    assert capsys.readouterr().out == (f"exercises/: all {len(NAMES)} exercises, the grader's reference and the example "
                                       "class are up to date\n")
    assert make(folders) == 0
    assert capsys.readouterr().out.endswith("were already up to date\n")
    (tmp_path / "exercises" / f"{NAMES[0]}.ipynb").write_text("{}")
    assert make([*folders, "--check"]) == 1
    assert capsys.readouterr().out == f"out of date: exercises/{NAMES[0]}.ipynb\n"


def test_every_lesson_of_mine_has_an_exercise():
    assert set(MINE) <= set(NAMES)
    assert sorted(p.stem for p in (ROOT / "exercises").glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_nbgrader_metadata_is_valid(name: str):
    """What nbgrader's generate_assignment requires (schema version 3), checked here without nbgrader."""
    solution = _read("solutions", name)
    assert solution.metadata["minitransformer"]["exercise"] == name
    ids = []
    for cell in solution.cells:
        info = cell.metadata["nbgrader"]
        assert info["schema_version"] == 3 and {"grade", "solution", "locked", "grade_id"} <= set(info)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", info["grade_id"]), info["grade_id"]
        ids.append(info["grade_id"])
        if info["grade"] and info["solution"]:  # a written answer graded by hand (nbgrader's manual grading)
            assert cell.cell_type == "markdown" and not info["locked"] and cell.metadata["minitransformer"]["manual"]
            assert isinstance(info["points"], (int, float)) and info["points"] > 0
        elif info["grade"]:
            assert cell.cell_type == "code" and info["locked"] and not info["solution"]
            assert isinstance(info["points"], (int, float)) and info["points"] > 0
        if info["solution"]:
            assert not info["locked"] and cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION") > 0
        if not info["grade"] and not info["solution"]:
            assert info["locked"]
    assert len(ids) == len(set(ids)), "grade_id must be unique"


@pytest.mark.parametrize("name", NAMES)
def test_an_exercise_hides_the_solutions_and_the_hidden_tests(name: str):
    exercise = _read("exercises", name)
    text = "\n".join(c.source for c in exercise.cells)
    for marker in ("### BEGIN SOLUTION", "### END SOLUTION", "HIDDEN TESTS", "### HINT", "### STUB", "> **Solutions.**"):
        assert marker not in text, marker
    for cell in exercise.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
        if cell.metadata["nbgrader"]["solution"] and "answer" not in cell.source:
            task = cell.metadata["nbgrader"]["grade_id"].split("-")[1]
            assert f'raise NotImplementedError("Task {task}: ' in cell.source


def test_the_generator_keeps_the_stub_signature_and_indentation():
    solution = _read("solutions", "04_multi_head_attention")
    stub = next(c for c in exercise_from_solution(solution).cells if "class MyMultiHeadAttention" in c.source)
    assert "    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor," in stub.source
    assert '        raise NotImplementedError("Task 2: multi-head attention, forward")' in stub.source
    ast_tree = __import__("ast").parse(stub.source)  # still valid Python
    assert ast_tree.body


def test_the_reference_ships_as_package_data():
    text = (ROOT / "grader" / "pyproject.toml").read_text(encoding="utf-8")
    assert '"minitransformer_grader" = ["reference/*.json"]' in text
    refs = G.load_references()
    assert set(MINE) <= set(refs)
    pe = refs["02_positional_encoding"]["tasks"][0]
    assert "sizes=((256, 512)" in pe["source"] and "256" not in pe["visible"] and pe["parts"] == [1, 1]


def test_the_check_table_holds_every_check_the_package_exports():
    """check_functions() is what the grader runs: exactly the check_* names of minitransformer.checks."""
    import minitransformer.checks
    from minitransformer_grader.remote import check_functions

    checks = check_functions()
    assert sorted(checks) == sorted(n for n in dir(minitransformer.checks) if n.startswith("check_"))
    assert all(checks[n] is getattr(minitransformer.checks, n) for n in checks)


def test_the_grader_ships_the_courses_license():
    pyproject = (ROOT / "grader" / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license-files = \["LICENSE"\]$', pyproject, re.MULTILINE)
    assert (ROOT / "grader" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()


def test_every_module_imports_without_nbgrader_and_the_plug_in_says_what_to_install():
    # The grader's own install has no nbgrader: every module still imports, and the plug-in says what to install.
    script = textwrap.dedent("""
        import importlib, importlib.abc, pkgutil, sys

        class Absent(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "nbgrader" or name.startswith("nbgrader."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, Absent())
        import minitransformer_grader
        for info in pkgutil.walk_packages(minitransformer_grader.__path__, prefix="minitransformer_grader."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        from minitransformer_grader.nbgrader_plugin import ClearSolutionsWithHints
        try:
            ClearSolutionsWithHints()
        except ModuleNotFoundError as err:
            print("MESSAGE", err)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "needs nbgrader" in done.stdout and "pip install -e 'grader[nbgrader]'" in done.stdout, done.stdout


def test_without_a_reference_the_grader_refuses(tmp_path):
    with pytest.raises(FileNotFoundError, match="will not grade with the submissions' own check cells"):
        G.load_references(tmp_path)


# ----------------------------------------------------------------------------------------------
# The grading command on a class folder: solutions, blank exercises, mistakes and hostile submissions
# ----------------------------------------------------------------------------------------------

def _code_cell(source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source)


def _insert_after(nb: nbformat.NotebookNode, needle: str, source: str) -> None:
    index = next(i for i, c in enumerate(nb.cells) if needle in c.source)
    nb.cells.insert(index + 1, _code_cell(source))


def _replace(nb: nbformat.NotebookNode, needle: str, old: str, new: str) -> None:
    cell = next(c for c in nb.cells if needle in c.source)
    assert old in cell.source
    cell.source = cell.source.replace(old, new)


def _class_folder(root: Path) -> Path:
    """submitted/<student>/<exercise>/<exercise>.ipynb, as nbgrader collects them, plus a few loose files."""
    def put(student: str, nb: nbformat.NotebookNode, name: str = "03_self_attention") -> None:
        folder = root / "submitted" / student / name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{name}.ipynb")

    for name in NAMES:
        put(f"solution-{name[:2]}", _read("solutions", name), name)
        put(f"blank-{name[:2]}", _read("exercises", name), name)

    # (student, the notebook it starts from, the cell after which a cell is added, that cell's code)
    added = [
        ("cheat-redefines", "exercises", "import math",  # a blank notebook that fakes its checks
         'def check_scaled_dot_product_attention(*args, **kwargs):\n    print("✓ Task 1 passed")\n\n'
         'check_padding_mask = lambda *args, **kwargs: print("✓ Task 2 passed")'),
        ("cheat-rebinds", "solutions", "import math", "import types\nminitransformer = types.SimpleNamespace()"),
        ("cheat-patches", "exercises", "import math",
         "import minitransformer.checks.compare as c\nc.compare = lambda *args, **kwargs: None"),
        ("hostile-kills-parent", "solutions", "def my_padding_mask", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        ("hostile-loops", "solutions", "def my_padding_mask",
         "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"),
    ]
    for student, kind, after, source in added:
        nb = _read(kind, "03_self_attention")
        _insert_after(nb, after, source)
        put(student, nb)

    strings = _read("solutions", "03_self_attention")
    _replace(strings, "def my_attention", "    d_k = query.size(-1)",
             "    import importlib\n"
             "    f = getattr(importlib.import_module('minitransformer'), 'scaled_' + 'dot_product_attention')\n"
             "    return f(query, key, value, mask)\n    d_k = query.size(-1)")
    put("cheat-strings", strings)

    victim = root / "victim.txt"
    victim.write_text("another student's work")
    deleter = _read("solutions", "03_self_attention")
    _insert_after(deleter, "import math", "import os\nfor p in ('../victim.txt', '../../victim.txt', "
                                          "'../../../victim.txt', '../../../../victim.txt', 'victim.txt'):\n"
                                          "    try:\n        os.remove(p)\n    except OSError:\n        pass")
    put("hostile-deletes", deleter)

    rewriter = _read("exercises", "03_self_attention")
    _insert_after(rewriter, "import math", (
        "import pathlib, minitransformer.checks as c, minitransformer_grader as g\n"
        "for path in [pathlib.Path(g.__file__).parent / 'reference' / '03_self_attention.json',\n"
        "             pathlib.Path(c.__file__).parent / 'lesson03.py']:\n"
        "    try:\n"
        "        path.chmod(0o644)\n"
        "        path.write_text(path.read_text().replace('raise AssertionError', 'return None or print'))\n"
        "    except OSError as err:\n"
        "        print('refused', err)"))
    put("hostile-rewrites", rewriter)
    put("blank-after-rewrite", _read("exercises", "03_self_attention"))

    broken = _read("solutions", "03_self_attention")
    _replace(broken, "def my_padding_mask", "return (tokens != pad_id)[:, None, None, :]",
             "return (tokens != pad_id)[:, None, None, :]]")
    put("syntax-error", broken)

    edited = _read("solutions", "03_self_attention")  # a bug hidden by a faked check, and a deleted check cell
    _replace(edited, "def my_attention", " / math.sqrt(d_k)", "")
    check1 = next(c for c in edited.cells if c.metadata["nbgrader"].get("grade_id") == "task-1")
    check1.source = 'print("✓ Task 1 passed")'
    edited.cells = [c for c in edited.cells if c.metadata["nbgrader"].get("grade_id") != "task-2"]
    put("edits-checks", edited)

    unreadable = root / "submitted" / "unreadable" / "03_self_attention"
    unreadable.mkdir(parents=True)
    (unreadable / "03_self_attention.ipynb").write_text("{ this is not a notebook")

    mystery = _read("solutions", "03_self_attention")
    mystery.metadata = {}
    for cell in mystery.cells:
        cell.metadata = {}
    nbformat.write(mystery, root / "mystery.ipynb")
    return root


# Seconds a cell may run. The capstone solution's training cell takes about 14 s alone; beside the other grading
# job on 2 cores it once passed 30 s in CI and lost its points.
CELL_TIMEOUT = 60


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Any]:
    root = _class_folder(tmp_path_factory.mktemp("class"))
    reference = (REFERENCE / "03_self_attention.json").read_bytes()
    checks = (ROOT / "minitransformer/checks/lesson03.py").read_bytes()
    out = root / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "grader")])}
    command = [sys.executable, "-m", "minitransformer_grader", "grade", str(root / "submitted"), str(root / "mystery.ipynb"),
               "--jobs", "2", "--timeout", str(CELL_TIMEOUT), "--json", str(out / "grades.json"), "--csv", str(out / "grades.csv"),
               "--quiet"]
    run = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    reports = json.loads((out / "grades.json").read_text(encoding="utf-8"))
    return {"run": run, "root": root, "reports": {(r["student"], r["exercise"]): r for r in reports},
            "csv": (out / "grades.csv").read_text(encoding="utf-8"),
            "feedback": (out / "grades_feedback.csv").read_text(encoding="utf-8"),
            "reference_intact": (REFERENCE / "03_self_attention.json").read_bytes() == reference
            and (ROOT / "minitransformer/checks/lesson03.py").read_bytes() == checks}


def _tasks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["grade_id"]: t for t in report["tasks"]}


@pytest.mark.parametrize("name", NAMES)
def test_the_solutions_get_full_marks(graded, name: str):
    report = graded["reports"][(f"solution-{name[:2]}", name)]
    assert report["error"] is None and report["notes"] == [], report
    assert report["score"] == report["max_score"] > 0, [t["message"] for t in report["tasks"]]
    assert all(t["message"].startswith("✓ Task") for t in report["tasks"])


@pytest.mark.parametrize("name", NAMES)
def test_the_blank_exercises_get_nothing(graded, name: str):
    report = graded["reports"][(f"blank-{name[:2]}", name)]
    assert report["error"] is None and report["score"] == 0 and report["max_score"] > 0
    for task in report["tasks"]:
        assert task["message"].startswith((f"NotImplementedError: Task {task['grade_id'][5:]}:", "AssertionError: Question")), \
            (task, report["notes"], report["output"][-3000:])


def test_a_written_answer_is_graded_by_hand_neither_given_nor_taken(graded):
    """Exercise 10's task 9, nbgrader's manually graded answer: stubbed, listed in the report, not in the score."""
    exercise = _read("exercises", "10_why_the_recipe")
    cell = next(c for c in exercise.cells if c.metadata["nbgrader"]["grade_id"] == "task-9")
    assert cell.cell_type == "markdown" and cell.source.startswith("*Your answer") and "SOLUTION" not in cell.source
    manual = G.load_references()["10_why_the_recipe"]["manual"]
    assert manual == [{"grade_id": "task-9", "task": "9", "points": 2,
                       "title": "experiment: what it can and cannot show (graded by hand)"}]
    for student in ("solution-10", "blank-10"):
        report = graded["reports"][(student, "10_why_the_recipe")]
        assert report["manual"] == manual and "task-9" not in {t["grade_id"] for t in report["tasks"]}
        assert report["max_score"] == sum(t["points"] for t in report["tasks"]) == 14


def test_the_bleu_task_grades_the_solution_full_and_a_blank_zero(graded):
    solution = _tasks(graded["reports"][("solution-08", "08_decoding_and_gpu")])["task-6"]
    blank = _tasks(graded["reports"][("blank-08", "08_decoding_and_gpu")])["task-6"]
    assert solution["score"] == 3 and solution["message"].startswith("✓ Task 6 passed: corpus BLEU"), solution
    assert blank["score"] == 0 and blank["message"].startswith("NotImplementedError: Task 6:"), blank


def test_redefined_checks_score_nothing(graded):
    # The checks run in the grader's process: the submission's own check functions are never called.
    tasks = _tasks(graded["reports"][("cheat-redefines", "03_self_attention")])
    assert tasks["task-1"]["score"] == 0 and tasks["task-1"]["message"].startswith("NotImplementedError: Task 1")
    assert tasks["task-2"]["score"] == 0 and tasks["task-2"]["message"].startswith("NotImplementedError: Task 2")


def test_rebinding_minitransformer_or_patching_the_checks_changes_nothing(graded):
    # The name `minitransformer` in the submission is not what the grader's checks use: the solution keeps its
    # points; the checks' internals are not in the sandbox, so a blank notebook that "patches" them still scores 0.
    rebinds = graded["reports"][("cheat-rebinds", "03_self_attention")]
    assert rebinds["score"] == rebinds["max_score"] == FULL_03
    patches = graded["reports"][("cheat-patches", "03_self_attention")]
    assert patches["score"] == 0
    assert "ModuleNotFoundError: No module named 'minitransformer.checks.compare'" in patches["output"]


def test_the_reference_imported_by_strings_costs_its_task_only(graded):
    report = graded["reports"][("cheat-strings", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 0
    assert tasks["task-1"]["message"].startswith("AssertionError: Task 1: your code calls minitransformer's "
                                                 "scaled_dot_product_attention")
    assert tasks["task-2"]["score"] == 1 and tasks["task-3"]["score"] == 1 and tasks["task-4"]["score"] == 2


def test_a_submission_cannot_delete_files_beside_it(graded):
    assert (graded["root"] / "victim.txt").read_text() == "another student's work"
    assert graded["reports"][("hostile-deletes", "03_self_attention")]["score"] == FULL_03


def test_a_submission_cannot_rewrite_the_reference(graded):
    assert graded["reference_intact"]
    rewriter = graded["reports"][("hostile-rewrites", "03_self_attention")]
    assert rewriter["score"] == 0
    blank = graded["reports"][("blank-after-rewrite", "03_self_attention")]
    assert blank["score"] == 0 and blank["error"] is None


def test_a_submission_that_kills_its_parent_is_still_graded(graded):
    report = graded["reports"][("hostile-kills-parent", "03_self_attention")]
    assert report["score"] == FULL_03, report


def test_a_loop_that_ignores_sigint_is_killed_and_the_rest_is_kept(graded):
    report = graded["reports"][("hostile-loops", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 3  # graded before the loop
    assert tasks["task-2"]["score"] == 0 and tasks["task-2"]["message"].startswith("not run: a cell ignored the interrupt")
    assert report["seconds"] < CELL_TIMEOUT + 5 + 30


def test_a_syntax_error_is_reported_as_such(graded):
    tasks = _tasks(graded["reports"][("syntax-error", "03_self_attention")])
    message = tasks["task-2"]["message"]
    assert message.startswith("SyntaxError in code cell 4") and "line 5: unmatched ']'" in message and "NameError" in message, message
    assert tasks["task-1"]["score"] == 3


def test_edited_and_deleted_check_cells_are_replaced_by_the_originals(graded):
    report = graded["reports"][("edits-checks", "03_self_attention")]
    tasks = _tasks(report)
    assert tasks["task-1"]["score"] == 0 and "divided by sqrt(d_k)" in tasks["task-1"]["message"]
    assert tasks["task-2"]["score"] == 1  # run at the end, where my_padding_mask exists
    assert any("task-1 was edited" in n for n in report["notes"]) and any("task-2 was missing" in n for n in report["notes"])


def test_an_unreadable_notebook_scores_0_of_its_maximum_and_fails_the_run(graded):
    report = graded["reports"][("unreadable", "03_self_attention")]
    assert report["error"].startswith("cannot read the notebook") and (report["score"], report["max_score"]) == (0, FULL_03)
    assert graded["run"].returncode == 1


def test_a_notebook_without_metadata_is_matched_by_content(graded):
    report = graded["reports"][("mystery", "03_self_attention")]
    assert report["score"] == FULL_03 and any("by the names it defines" in n for n in report["notes"])


def test_the_csv_has_one_row_per_submission_and_the_reasons_beside_it(graded):
    rows = list(csv.DictReader(io.StringIO(graded["csv"])))
    assert len(rows) == len(graded["reports"])
    row = next(r for r in rows if r["student"] == "cheat-strings")
    assert (row["exercise"], row["03 task 1 (/3)"], row["03 task 2 (/1)"], row["03 task 3 (/1)"], row["03 task 4 (/2)"],
            row["total"], row["max"]) == ("03_self_attention", "0", "1", "1", "2", str(FULL_03 - 3), str(FULL_03))
    # One column per task of each exercise, headed with its points, exercise by exercise in the reference's order.
    references = G.load_references()
    tasks_of = {name: [f"{name[:2]} task {t['grade_id'][5:]} (/{t['points']:g})" for t in references[name]["tasks"]]
                for name in NAMES}
    header = next(csv.reader(io.StringIO(graded["csv"])))
    assert header == ["student", "exercise", "notebook", *[c for name in NAMES for c in tasks_of[name]],
                      "total", "max", "error"], header
    for r in rows:  # a row fills the columns of its own exercise, whose sum is the total and the headers the max
        filled = {k: float(v) for k, v in r.items() if " task " in k and v != ""}
        assert set(filled) == set(tasks_of.get(r["exercise"], [])), r
        assert math.isclose(sum(filled.values()), float(r["total"]))
        assert math.isclose(sum(float(k.split("(/")[1][:-1]) for k in filled), float(r["max"]) if filled else 0.0)
    feedback = list(csv.DictReader(io.StringIO(graded["feedback"])))
    lost = [f for f in feedback if f["student"] == "cheat-strings"]
    assert [f["task"] for f in lost] == ["task-1"] and "scaled_dot_product_attention" in lost[0]["reason"]


def test_the_json_names_student_and_exercise(graded):
    report = graded["reports"][("solution-03", "03_self_attention")]
    assert report["student"] == "solution-03" and report["exercise"] == "03_self_attention"
    assert {"grade_id", "title", "points", "score", "message", "passed"} <= set(report["tasks"][0])


def test_no_tcp_warning_is_printed(graded):
    assert "TCP without encryption" not in graded["run"].stdout + graded["run"].stderr


@pytest.mark.parametrize("option", ["--timeout=0", "--timeout=-3", "--notebook-timeout=0", "--timeout=nan",
                                    "--notebook-timeout=nan", "--timeout=inf", "--notebook-timeout=-inf"])
def test_a_time_limit_must_be_finite_and_positive(option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        G.main([str(ROOT / "exercises"), option])
    assert exit_info.value.code == 2 and "expected a finite number of seconds > 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="finite number of seconds > 0"):
        G.grade_notebook(ROOT / "exercises" / "03_self_attention.ipynb", timeout=float(option.split("=")[1]))


def test_the_help_says_grading_executes_student_code_in_a_sandbox(capsys):
    with pytest.raises(SystemExit):
        G.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the learner's code of each one runs in a sandbox" in text and "bubblewrap" in text
    assert "--no-sandbox" in text and "only inside a container" in text


def test_the_command_refuses_a_missing_path(capsys):
    with pytest.raises(SystemExit) as exit_info:
        G.main(["no/such/notebook.ipynb"])
    assert exit_info.value.code == 2
    assert "no such notebook or folder" in capsys.readouterr().err


def test_the_notebook_time_limit_stops_a_slow_notebook():
    from minitransformer_grader.sandbox import KernelPackage
    from minitransformer_grader.submission import run_plan

    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "source": "import time\ntime.sleep(2)", "number": n} for n in range(30)]}
        result = run_plan(plan, package, cell_timeout=100, notebook_timeout=20, memory_mb=0)  # room for a slow start
    finally:
        package.remove()
    assert result.notebook_timeout and not result.ended and 0 < len(result.events) < 30


def test_a_submission_sees_a_private_folder_and_none_of_the_graders_secrets(monkeypatch):
    from minitransformer_grader.sandbox import KernelPackage
    from minitransformer_grader.submission import run_plan

    monkeypatch.setenv("GRADER_SECRET_TOKEN", "s3cret")
    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "number": 1, "source":
                           "import os, pathlib\nassert 'GRADER_SECRET_TOKEN' not in os.environ\n"
                           "assert os.listdir('.') == []\nassert os.environ['OMP_NUM_THREADS'] == '1'\n"
                           "import torch\nassert torch.get_num_threads() == 1"}]}
        result = run_plan(plan, package, cell_timeout=60, notebook_timeout=120, memory_mb=0)
    finally:
        package.remove()
    assert result.ended and result.events[0]["error"] is None, result.events


def test_the_memory_limit_stops_a_greedy_cell():
    from minitransformer_grader.sandbox import KernelPackage
    from minitransformer_grader.submission import run_plan

    package = KernelPackage()
    try:
        plan = {"cells": [{"kind": "code", "source": "hog = bytearray(6 << 30)", "number": 1},
                          {"kind": "code", "source": "print('still here')", "number": 2}]}
        result = run_plan(plan, package, cell_timeout=60, notebook_timeout=120, memory_mb=3072)
    finally:
        package.remove()
    assert result.events[0]["error"]["ename"] == "MemoryError" and result.events[1]["error"] is None and result.ended


def test_the_grades_so_far_are_written_when_the_grader_dies(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    nbformat.write(_read("solutions", "03_self_attention"), folder / "a_first.ipynb")
    slow = _read("solutions", "03_self_attention")
    _insert_after(slow, "import math", "import time\ntime.sleep(30)")
    nbformat.write(slow, folder / "b_slow.ipynb")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    grader = subprocess.Popen([sys.executable, "-m", "minitransformer_grader", "grade", str(folder), "--quiet",
                               "--json", str(tmp_path / "g.json"), "--csv", str(tmp_path / "g.csv")],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            if (tmp_path / "g.json").exists():
                break
            time.sleep(0.5)
    finally:
        grader.terminate()
        grader.wait(timeout=60)
    reports = json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))
    assert [(r["student"], r["score"]) for r in reports] == [("a_first", FULL_03)]
    assert (tmp_path / "g.csv").read_text(encoding="utf-8").count("\n") == 2  # header and one row


def test_the_exercise_is_found_from_the_option_metadata_name_or_content():
    from minitransformer_grader.notebooks import identify

    refs = G.load_references()
    nb = _read("solutions", "05_add_norm_and_feed_forward")
    assert identify(nb, Path("x/alice.ipynb"), refs) == ("05_add_norm_and_feed_forward", "metadata")
    assert identify(nb, Path("x/alice.ipynb"), refs, "03_self_attention") == ("03_self_attention", "--exercise")
    assert identify(nb, Path("x/alice.ipynb"), refs, "nope")[0] is None
    nb.metadata = {}
    assert identify(nb, Path("07_training/alice.ipynb"), refs) == ("07_training", "name")
    assert identify(nb, Path("x/alice.ipynb"), refs) == ("05_add_norm_and_feed_forward", "content")
    assert identify(None, Path("x/alice.ipynb"), refs) == (None, "not found")


# nbgrader's own bookkeeping, which make-exercises does not write (exercises/README.md, "Releasing the exercises
# with nbgrader"): the checksums that autograde compares, JupyterLab's cell locks, the solution run's timings.
_NBGRADER_ONLY_METADATA = ("editable", "deletable", "execution")
_NBGRADER_ONLY_NBGRADER = ("checksum", "cell_type")


def _differences(released: nbformat.NotebookNode, ours: nbformat.NotebookNode) -> list[str]:
    """Where nbgrader's student notebook and ours differ, beyond nbgrader's own bookkeeping ([] when equal)."""
    found = []
    if released.metadata != ours.metadata:
        found.append(f"notebook metadata: {dict(released.metadata)} != {dict(ours.metadata)}")
    if len(released.cells) != len(ours.cells):
        found.append(f"{len(released.cells)} cells != {len(ours.cells)}")
    for index, (theirs, mine) in enumerate(zip(released.cells, ours.cells)):
        for key in ("id", "cell_type", "source", "outputs", "execution_count"):
            if theirs.get(key) != mine.get(key):
                found.append(f"cell {index} {key}: {theirs.get(key)!r} != {mine.get(key)!r}")
        meta = {k: v for k, v in theirs.metadata.items() if k not in _NBGRADER_ONLY_METADATA}
        meta["nbgrader"] = {k: v for k, v in meta["nbgrader"].items() if k not in _NBGRADER_ONLY_NBGRADER}
        if meta != mine.metadata:
            found.append(f"cell {index} metadata: {meta} != {dict(mine.metadata)}")
    return found


def _nbgrader_config() -> str:
    """The nbgrader_config.py that exercises/README.md tells instructors to use."""
    readme = (ROOT / "exercises" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(# nbgrader_config\.py\n.*?)```", readme, re.DOTALL)
    assert len(blocks) == 1, "exercises/README.md should show one nbgrader_config.py"
    return blocks[0]


def _clear_with(preprocessor: Any, solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """One nbgrader ClearSolutions-like step, then nbgrader's own clearing of outputs and hidden tests."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput

    nb = copy.deepcopy(solution)
    for step in (preprocessor, ClearOutput(), ClearHiddenTests()):
        nb, _ = step.preprocess(nb, {})
    return nb


@pytest.mark.extra("nbgrader")
def test_nbgraders_own_clear_solutions_loses_the_hints_and_ours_keeps_them():
    """In process, without the gradebook: the step the plug-in replaces, nbgrader's and ours, on every exercise."""
    from nbgrader.preprocessors import ClearSolutions

    from minitransformer_grader.nbgrader_plugin import ClearSolutionsWithHints

    for name in NAMES:
        solution = _read("solutions", name)
        ours = exercise_from_solution(solution)
        plain = _differences(_clear_with(ClearSolutions(), solution), ours)
        # nbgrader alone: a bare stub in every task cell and the solutions note in the first cell.
        tasks = sum(bool(c.metadata["nbgrader"]["solution"]) for c in solution.cells)
        assert sum("raise NotImplementedError()" in d or "# YOUR CODE HERE" in d or "YOUR ANSWER HERE" in d
                   for d in plain) == tasks, name  # a written answer (markdown) gets nbgrader's text stub
        assert any("cell 0 source" in d and "> **Solutions.**" in d for d in plain), name
        assert _differences(_clear_with(ClearSolutionsWithHints(), solution), ours) == [], name
    blockless = _with_a_task_cell_without_block()
    assert _differences(_clear_with(ClearSolutionsWithHints(), blockless), exercise_from_solution(blockless)) == []


def _with_a_task_cell_without_block() -> nbformat.NotebookNode:
    """03 with task 2's answer written without BEGIN/END SOLUTION, its hint in the cell's metadata."""
    solution = _read("solutions", "03_self_attention")
    cell = next(c for c in solution.cells if c.metadata["nbgrader"].get("grade_id") == "task-2-code")
    cell.source = "def my_padding_mask(tokens, pad_id):\n    return (tokens != pad_id)[:, None, None, :]"
    cell.metadata["minitransformer"] = {"hint": "compare with pad_id"}
    return solution


def test_a_task_cell_without_a_solution_block_is_all_answer():
    """nbgrader's rule for a solution cell without BEGIN/END SOLUTION, with the course's stub and hint."""
    exercise = exercise_from_solution(_with_a_task_cell_without_block())
    stub = next(c for c in exercise.cells if c.metadata["nbgrader"].get("grade_id") == "task-2-code")
    assert stub.source == 'raise NotImplementedError("Task 2: compare with pad_id")'


@pytest.mark.extra("nbgrader")
def test_the_nbgrader_configuration_replaces_only_clear_solutions():
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearOutput, ClearSolutions
    from traitlets.config import Config

    from minitransformer_grader.nbgrader_plugin import ClearSolutionsWithHints, configure

    config = Config()
    configure(config)
    default = GenerateAssignment.class_traits()["preprocessors"].default()
    assert config.GenerateAssignment.preprocessors == [ClearSolutionsWithHints if p is ClearSolutions else p
                                                       for p in default]
    assert ClearSolutions not in config.GenerateAssignment.preprocessors
    configure(config)  # twice: unchanged
    assert config.GenerateAssignment.preprocessors.count(ClearSolutionsWithHints) == 1
    own = Config()
    own.GenerateAssignment.preprocessors = [ClearOutput]
    with pytest.raises(ValueError, match="no ClearSolutions to replace"):
        configure(own)


@pytest.mark.extra("nbgrader")
def test_nbgrader_generate_assignment_writes_our_exercises(tmp_path):
    """Real nbgrader, configured as exercises/README.md says, releases the notebooks of exercises/ (see _differences)."""
    (tmp_path / "nbgrader_config.py").write_text(_nbgrader_config(), encoding="utf-8")
    for name in NAMES:
        (tmp_path / "source" / name).mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / f"{name}.ipynb", tmp_path / "source" / name)
    # nbgrader creates its gradebook by running the `alembic` command, found on PATH: put this Python's
    # scripts folder first, so that the test passes also when the environment was not activated.
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")}
    run = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "*", f"--CourseDirectory.root={tmp_path}",
                          f"--CourseDirectory.db_url=sqlite:///{tmp_path}/gradebook.db"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    for name in NAMES:
        released = nbformat.read(tmp_path / "release" / name / f"{name}.ipynb", as_version=4)
        assert _differences(released, exercise_from_solution(_read("solutions", name))) == [], name
        assert _differences(released, _read("exercises", name)) == [], name  # the committed ones, too
        text = "\n".join(c.source for c in released.cells)
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "YOUR CODE HERE" not in text


@pytest.mark.parametrize("wrong, blamed", [("mask", "check task 2"), ("attention", "check task 1")])
def test_putting_it_together_in_03_blames_the_right_task(wrong, blamed):
    solution = _read("solutions", "03_self_attention")
    space: dict[str, Any] = {}
    for cell in solution.cells:
        if cell.cell_type == "code" and ("def my_" in cell.source or "import math" in cell.source
                                         or re.search(r"^prediction_\w+ = ", cell.source, flags=re.MULTILINE)):
            exec(cell.source, space)
    if wrong == "mask":
        space["my_padding_mask"] = lambda tokens, pad_id: (tokens != pad_id)[:, None, :, None]  # hides rows
    else:
        right = space["my_attention"]
        space["my_attention"] = lambda q, k, v, mask=None: right(q, k, v)  # forgets the mask
    together = next(c for c in solution.cells if "tokens = torch.tensor([[5, 7, 9, 4]" in c.source)
    with pytest.raises(AssertionError, match=blamed):
        exec(together.source, space)


def test_partial_credit_counts_each_passing_part():
    from minitransformer_grader.submission import RunResult
    from minitransformer_grader.notebooks import Report, _score

    ref = G.load_references()["06_decoder_and_masking"]
    task = next(t for t in ref["tasks"] if t["grade_id"] == "task-6")
    assert task["parts"] == [1, 1] and "seeds=(3, 4)" in task["source"] and "seeds" not in task["visible"]
    cells = [{"kind": "check", "grade_id": t["grade_id"], "source": t["source"]} for t in ref["tasks"]]
    run = RunResult(ended=True)
    for index, t in enumerate(ref["tasks"]):
        parts = [{"passed": True, "message": "✓"}]
        if t["grade_id"] == "task-6":  # the visible check passes, the hidden one fails
            parts = [{"passed": True, "message": "✓ Task 6 passed"}, {"passed": False, "message": "AssertionError: no"}]
        run.events[index] = {"event": "done", "cell": index, "parts": parts}
    results = {r.grade_id: r for r in _score(cells, ref, run, 30, 60, Report(path="x"))}
    assert (results["task-6"].score, results["task-6"].points) == (1, 2)
    assert results["task-6"].message == "1 of 2 points; part 2 failed: AssertionError: no"
