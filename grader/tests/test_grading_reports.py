"""Where the grader writes its reports, what it refuses, and how it names students (no notebook is run here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from pathlib import Path

import pytest

import minitransformer_grader.classroom as classroom
from minitransformer_grader.notebooks import Report, TaskResult

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = sorted(p.stem for p in (ROOT / "grader/minitransformer_grader/reference").glob("*.json"))


@pytest.fixture()
def submissions(tmp_path: Path) -> Path:
    folder = tmp_path / "class"
    for student in ("alice", "bob"):
        (folder / student).mkdir(parents=True)
        shutil.copy(ROOT / "exercises" / "03_self_attention.ipynb", folder / student / "03_self_attention.ipynb")
    return folder


def _refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        classroom.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1]


def test_one_file_for_two_reports_is_refused(submissions, tmp_path, capsys):
    line = _refused(capsys, [str(submissions), "--json", str(tmp_path / "x"), "--csv", str(tmp_path / "x")])
    assert "two reports would be written to one file" in line


def test_a_report_onto_a_submission_or_inside_the_submissions_is_refused(submissions, capsys):
    notebook = submissions / "alice" / "03_self_attention.ipynb"
    before = notebook.read_bytes()
    assert "would overwrite a submitted notebook" in _refused(capsys, [str(submissions), "--json", str(notebook)])
    assert "inside the submissions folder" in _refused(capsys, [str(submissions), "--csv", str(submissions / "g.csv")])
    assert "inside the submissions folder" in _refused(capsys, [str(submissions), "--out", str(submissions / "grades")])
    assert notebook.read_bytes() == before


def test_a_folder_or_an_unwritable_place_is_refused(submissions, tmp_path, capsys):
    (tmp_path / "a-folder").mkdir()
    assert "is a folder" in _refused(capsys, [str(submissions), "--json", str(tmp_path / "a-folder")])
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(locked, os.W_OK):  # root ignores permissions: a read-only file system instead
            locked = next((Path(p) for p in ("/sys", "/proc/sys") if not os.access(p, os.W_OK)), None)
            if locked is None:
                pytest.skip("no unwritable place here")
        assert "no permission to write" in _refused(capsys, [str(submissions), "--out", str(locked / "grades")])
    finally:
        (tmp_path / "locked").chmod(stat.S_IRWXU)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert "is not a folder" in _refused(capsys, [str(submissions), "--json", str(blocker / "g.json")])


def test_reports_go_beside_the_submissions_folder_by_default(submissions):
    assert classroom.default_out([str(submissions)]) == submissions.parent.resolve() / "grades"
    assert classroom.default_out([str(submissions / "alice")]) == submissions.resolve() / "grades"
    notebook = submissions / "alice" / "03_self_attention.ipynb"
    assert classroom.default_out([str(notebook)]) == submissions.resolve() / "grades"
    assert "/grades/" in (ROOT / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("given", ["class", "class/alice", "class/alice/03_self_attention.ipynb"])
def test_the_student_is_named_after_the_folder_whatever_is_given(submissions, given):
    found = classroom._find([str(submissions.parent / given)], EXERCISES)
    assert {student for path, student in found if "alice" in str(path)} == {"alice"}


def test_nbgrader_and_flat_layouts_name_the_student(tmp_path):
    nb = tmp_path / "course" / "submitted" / "carol" / "03_self_attention" / "03_self_attention.ipynb"
    flat = tmp_path / "flat" / "dave.ipynb"
    for path in (nb, flat):
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    assert classroom._find([str(nb.parent)], EXERCISES) == [(nb, "carol")]
    assert classroom._find([str(tmp_path / "course")], EXERCISES) == [(nb, "carol")]
    assert classroom._find([str(flat)], EXERCISES) == [(flat, "dave")]


def test_the_summary_columns_line_up(submissions, tmp_path, capsys, monkeypatch):
    def fake(items, **options):
        reports = []
        for (path, student), score in zip(items, (5, 0)):
            report = Report(path=str(path), student=student + "-with-a-long-name" * (score > 0), exercise="03")
            report.tasks = [TaskResult("task-1", "t", 5.0, float(score), "m")]
            options["on_report"](report)
            reports.append(report)
        return reports

    monkeypatch.setattr(classroom, "grade_all", fake)
    monkeypatch.setattr("minitransformer_grader.sandbox.sandbox_available", lambda: (True, ""))
    assert classroom.main([str(submissions), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("submission"))):][:3]
    starts = [[m.start() for m in re.finditer(r"(?<!\S)\S+", line)] for line in table]  # where each column begins
    assert starts[0] == starts[1] == starts[2] and len(starts[0]) == 3, table
    assert table[1].split()[1:] == ["alice-with-a-long-name", "5/5"] and table[2].split()[1:] == ["bob", "0/5"]
    assert len(json.loads((tmp_path / "out" / "grades.json").read_text())) == 2


def test_without_bubblewrap_grading_refuses_and_says_how_to_install_it(submissions, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("minitransformer_grader.sandbox.sandbox_available",
                        lambda: (False, "bubblewrap (bwrap) is not installed"))
    assert classroom.main([str(submissions), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in err and "apt-get install bubblewrap" in err and "--no-sandbox" in err
    assert not (tmp_path / "out").exists()


def test_the_csv_names_each_task_column_by_exercise_task_and_points(tmp_path):
    # Task 2 is worth 2 points in 02 and 1 in 03: one generic "task-2" column would add up different things.
    def report(student: str, exercise: str | None, points: list[float], scores: list[float]) -> Report:
        tasks = [TaskResult(f"task-{i}", f"title {i}", p, s, "✓" if s == p else "no")
                 for i, (p, s) in enumerate(zip(points, scores), start=1)]
        return Report(path=f"{student}.ipynb", student=student, exercise=exercise, tasks=tasks)

    reports = [report("alice", "03_self_attention", [3, 1, 1, 2], [3, 1, 0, 1]),
               report("bob", "02_positional_encoding", [2, 2, 1], [2, 0, 1]),
               report("carol", None, [], [])]
    classroom.write_results(reports, tmp_path / "g.json", tmp_path / "g.csv")
    lines = (tmp_path / "g.csv").read_text(encoding="utf-8").splitlines()
    assert lines == [
        "student,exercise,notebook,02 task 1 (/2),02 task 2 (/2),02 task 3 (/1),"
        "03 task 1 (/3),03 task 2 (/1),03 task 3 (/1),03 task 4 (/2),total,max,error",
        "alice,03_self_attention,alice.ipynb,,,,3,1,0,1,5,7,",
        "bob,02_positional_encoding,bob.ipynb,2,0,1,,,,,3,5,",
        "carol,,carol.ipynb,,,,,,,,0,0,",
    ]
    assert [t["grade_id"] for t in json.loads((tmp_path / "g.json").read_text())[0]["tasks"]] == \
        ["task-1", "task-2", "task-3", "task-4"]  # the JSON keeps the ids
    feedback = (tmp_path / "g_feedback.csv").read_text(encoding="utf-8").splitlines()
    assert feedback[1].startswith("alice,03_self_attention,task-3,title 3,0,1,")


def test_two_exercises_with_one_number_are_named_in_full():
    reports = [Report(path="a", student="a", exercise=name, tasks=[TaskResult("task-1", "t", 1, 1, "✓")])
               for name in ("03_self_attention", "03_other")]
    assert list(classroom.task_columns(reports).values()) == ["03_other task 1 (/1)", "03_self_attention task 1 (/1)"]
