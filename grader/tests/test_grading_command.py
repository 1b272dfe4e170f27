"""``python -m minitransformer grade``: the library finds the grader through its entry point and hands it the command.

Without the grader installed the library says in one line how to install it (tests/test_cli.py).
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from minitransformer.cli import main


def test_the_grader_declares_the_grade_command_as_an_entry_point() -> None:
    found = entry_points(group="minitransformer.commands", name="grade")
    assert [ep.value for ep in found] == ["minitransformer_grader.classroom:main"]


def test_grade_subcommand_runs_the_grader(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["grade", "--help"])
    assert stop.value.code == 0
    assert "--json" in capsys.readouterr().out


def test_grade_usage_names_the_command_typed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m minitransformer grade ")


def test_grade_help_names_each_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    out = capsys.readouterr().out
    assert "grade grade" not in out and "python -m minitransformer grade submissions/" in out


def test_both_commands_run_the_grader_in_a_fresh_process() -> None:
    for command, usage in ((["-m", "minitransformer", "grade"], "usage: python -m minitransformer grade "),
                           (["-m", "minitransformer_grader"], "usage: python -m minitransformer_grader ")):
        done = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith(usage), (command, done.stdout[:300], done.stderr[-2000:])
        assert "--no-sandbox" in done.stdout


def test_the_grader_parses_python_one_thread_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # --jobs grades in threads, and CPython 3.11 shares ast's recursion counter between them: two parses at once
    # can fail with "AST constructor recursion depth mismatch" (python/cpython#106905). Every parse of the grading
    # path goes through scan.parse and its lock (generate.py makes the exercises, in one thread, not grades).
    import ast
    from pathlib import Path

    import minitransformer_grader
    from minitransformer_grader import scan

    package = Path(minitransformer_grader.__file__).parent
    direct = [f"{path.name}:{number}" for path in sorted(package.glob("*.py")) if path.name not in ("scan.py", "generate.py")
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "ast.parse(" in line]
    assert not direct, f"parse with minitransformer_grader.scan.parse, not ast.parse: {direct}"
    held = []
    original = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source: held.append(scan._PARSE_LOCK.locked()) or original(source))
    assert isinstance(scan.parse("x = 1"), ast.Module) and held == [True] and not scan._PARSE_LOCK.locked()
