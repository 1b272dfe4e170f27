"""exercises/README.md's table of tasks is generated from the solutions' metadata (tools/exercise_table.py)."""

from __future__ import annotations

from tools import exercise_table as T


def test_every_graded_task_states_its_kind():
    by_exercise = T.tasks()  # raises on a check cell without a known kind
    assert len(by_exercise) >= 11 and all(rows for rows in by_exercise.values())
    assert all(r["kind"] in T.KINDS for rows in by_exercise.values() for r in rows)


def test_every_exercise_from_01_on_has_a_debugging_task():
    for name, rows in T.tasks().items():
        if name[:2] in {f"{n:02d}" for n in range(1, 11)}:
            assert [r for r in rows if r["kind"] == "debug"], name


def test_the_readme_table_is_up_to_date():
    readme = T.README.read_text(encoding="utf-8")
    assert T.render(readme, T.tasks()) == readme, "run python tools/exercise_table.py"
