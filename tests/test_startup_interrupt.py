"""Ctrl-C while ``python -m minitransformer`` starts: one line on stderr, exit status 130, no traceback.

Each test starts the command in a subprocess that stops, deterministically, in the middle of start-up:
a ``sitecustomize`` module put first on its ``PYTHONPATH`` installs an import hook that, when the named
module is about to be imported (``torch``, first of all), writes a marker file and waits. The test sends
SIGINT once the marker exists, so the interrupt lands exactly there, whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minitransformer import _startup

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

HOOK = '''
import os, sys, time

class _StopAt:
    """Before MODULE is imported: write the marker, then wait for a signal (whose handler decides what happens)."""

    def find_spec(self, name, path=None, target=None):
        if name == os.environ["STOP_AT_MODULE"]:
            sys.meta_path.remove(self)
            open(os.environ["STOP_AT_MARKER"], "w").close()
            while True:
                time.sleep(0.05)
        return None

sys.meta_path.insert(0, _StopAt())
'''


def _interrupt_at(module: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` from the repository, send SIGINT when it is about to import ``module``."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    marker = tmp_path / "reached"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)]), "STOP_AT_MODULE": module,
           "STOP_AT_MARKER": str(marker), "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}

    def like_a_terminal() -> None:  # Ctrl-C's default, even when the tests run as a background job
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    process = subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=like_a_terminal)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert process.poll() is None, f"the program ended before importing {module}: {process.communicate()}"
            assert time.monotonic() < deadline, f"the program never reached the import of {module}"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("module, args", [
    ("torch", ["-m", "minitransformer", "train", "--help"]),  # the first heavy import, from the package
    ("minitransformer.cli", ["-m", "minitransformer", "train", "--help"]),  # torch loaded, the command line next
    ("minitransformer.grading.classroom", ["-m", "minitransformer", "grade", "--help"]),
    ("torch", ["-m", "minitransformer.grading", "make-exercises", "--check"]),
], ids=["during import torch", "during import of the command line", "during import of the grader",
        "python -m minitransformer.grading"])
def test_ctrl_c_during_start_up_prints_one_line_and_exits_130(module: str, args: list[str], tmp_path: Path) -> None:
    run = _interrupt_at(module, args, tmp_path)
    assert run.returncode == 130, (run.returncode, run.stderr[-3000:])
    assert "Traceback" not in run.stderr and "KeyboardInterrupt" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip() == "minitransformer: interrupted (Ctrl-C) while starting", run.stderr[-3000:]
    assert run.stdout == ""


def test_after_start_up_ctrl_c_is_the_commands_to_handle(tmp_path: Path) -> None:
    # The attention command imports its drawing code after start-up: Ctrl-C there is a KeyboardInterrupt, which
    # the command reports in its own words (a training run would save a checkpoint first).
    run = _interrupt_at("minitransformer.inspection", ["-m", "minitransformer", "attention", "--checkpoint",
                                                       str(tmp_path / "none"), "a date"], tmp_path)
    assert run.returncode == 130, (run.returncode, run.stderr[-3000:])
    assert run.stderr.strip() == "minitransformer attention: interrupted (Ctrl-C)", run.stderr[-3000:]


def test_without_the_guard_the_same_interrupt_gives_a_traceback(tmp_path: Path) -> None:
    # What the tests above would see without it: proof that the interrupt does land inside start-up.
    code = "import sys; sys.argv = ['x']; import minitransformer"
    run = _interrupt_at("torch", ["-c", code], tmp_path)
    assert run.returncode in (-signal.SIGINT, 130, 1), run.returncode
    assert "KeyboardInterrupt" in run.stderr and "Traceback" in run.stderr, run.stderr[-3000:]


@pytest.mark.parametrize("argv, orig_argv, expected", [
    (["-m"], ["python", "-m", "minitransformer", "train"], True),
    (["-m"], ["python", "-u", "-X", "dev", "-m", "minitransformer.grading", "grade", "x"], True),
    (["-m"], ["python", "-mminitransformer"], True),
    (["-m"], ["python", "-m", "pytest", "tests"], False),
    # The grading sandbox's runner: its cells are interrupted by a simulated Ctrl-C (_thread.interrupt_main).
    (["-m"], ["python", "-s", "-m", "minitransformer.grading._runner", "3", "4", "5"], False),
    (["/venv/bin/minitransformer", "train"], ["python", "/venv/bin/minitransformer", "train"], True),
    (["-c"], ["python", "-c", "import minitransformer"], False),
    (["lesson.py"], ["python", "lesson.py"], False),
    ([""], ["python"], False),
])
def test_only_the_command_line_is_guarded(argv: list[str], orig_argv: list[str], expected: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv, raising=False)
    assert _startup._is_the_command_line() is expected


def test_importing_the_package_leaves_ctrl_c_alone() -> None:
    # A notebook or a script that imports the package keeps Python's KeyboardInterrupt.
    code = ("import signal, minitransformer\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGINT)")
    # Ctrl-C's default in the child, as from a terminal: a background job (nohup, CI) may inherit SIGINT ignored.
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_done_gives_ctrl_c_back_and_leaves_other_handlers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    previous = signal.getsignal(signal.SIGINT)
    try:
        monkeypatch.setattr(sys, "argv", ["minitransformer"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert _startup.guard() and signal.getsignal(signal.SIGINT) is _startup._interrupted
        _startup.done()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # e.g. started by nohup: stays ignored
        assert not _startup.guard() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        mine = lambda signum, frame: None  # noqa: E731 - a handler someone else installed
        signal.signal(signal.SIGINT, mine)
        _startup.done()
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)
