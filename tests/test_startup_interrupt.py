"""Ctrl-C and the command line: one line on stderr and exit status 130 once the command runs, no traceback;
and ``import minitransformer`` installs no signal handler (no side effect at import).

The tests that interrupt a real program start it in a subprocess that stops, deterministically, where the
test wants: a ``sitecustomize`` module put first on its ``PYTHONPATH`` installs an import hook that, when the
named module is about to be imported, writes a marker file and waits. The test sends SIGINT once the marker
exists, so the interrupt lands exactly there, whatever the machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minitransformer import cli

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


def _like_a_terminal() -> None:  # Ctrl-C's default, even when the tests run as a background job (nohup, CI)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_at(module: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` from the repository, send SIGINT when it is about to import ``module``."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    marker = tmp_path / "reached"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), str(ROOT)]), "STOP_AT_MODULE": module,
           "STOP_AT_MARKER": str(marker), "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    process = subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_like_a_terminal)
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


def test_once_the_command_runs_ctrl_c_is_one_line_and_status_130(tmp_path: Path) -> None:
    # The attention command imports its drawing code once it runs: Ctrl-C there is a KeyboardInterrupt, which
    # the command reports in its own words (a training run would save a checkpoint first).
    run = _interrupt_at("minitransformer.inspection", ["-m", "minitransformer", "attention", "--checkpoint",
                                                       str(tmp_path / "none"), "a date"], tmp_path)
    assert run.returncode == 130, (run.returncode, run.stderr[-3000:])
    assert run.stderr.strip() == "minitransformer attention: interrupted (Ctrl-C)", run.stderr[-3000:]
    assert run.stdout == ""


def test_ctrl_c_while_the_arguments_are_read_is_one_line_and_status_130(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["train", "--help"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "minitransformer: interrupted (Ctrl-C) while starting\n" and captured.out == ""


def test_during_import_minitransformer_ctrl_c_is_pythons_own(tmp_path: Path) -> None:
    # `python -m minitransformer` imports the package, and torch with it, before a line of the command runs.
    # With no hook at import, Ctrl-C there is Python's KeyboardInterrupt, as during the import of any library.
    run = _interrupt_at("torch", ["-m", "minitransformer", "train", "--help"], tmp_path)
    assert run.returncode in (-signal.SIGINT, 130, 1), run.returncode
    assert "KeyboardInterrupt" in run.stderr and "Traceback" in run.stderr, run.stderr[-3000:]


def test_importing_the_package_installs_no_signal_handler() -> None:
    # A notebook or a script that imports the package keeps every handler it had: Python's KeyboardInterrupt
    # for Ctrl-C, and the defaults of the other signals. The whole public API is imported, the command line too.
    code = ("import signal\n"
            "names = [n for n in dir(signal) if n.startswith('SIG') and not n.startswith('SIG_') and n not in "
            "('SIGKILL', 'SIGSTOP')]\n"
            "signals = {n: getattr(signal, n) for n in names if isinstance(getattr(signal, n), signal.Signals)}\n"
            "before = {n: signal.getsignal(s) for n, s in signals.items()}\n"
            "import minitransformer, minitransformer.cli, minitransformer.playground, minitransformer.training\n"
            "after = {n: signal.getsignal(s) for n, s in signals.items()}\n"
            "assert after == before, {n: (before[n], after[n]) for n in before if after[n] != before[n]}\n"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                   preexec_fn=_like_a_terminal)
