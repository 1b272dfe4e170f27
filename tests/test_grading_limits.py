"""The per-submission limits of :mod:`minitransformer.grading._limits`, each mechanism tested on its own.

The escapes suite grades a memory hog with whatever mechanism this machine allows (a cgroup here, maybe the
watchdog elsewhere); these tests force the watchdog, so that the fallback is proven on every machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from minitransformer.grading import _limits

# A parent that starts ``n`` children of ``mb`` MiB each; every child holds its memory until stdin closes.
_TREE = """
import subprocess, sys
n, mb = int(sys.argv[1]), int(sys.argv[2])
code = f"import sys; b = bytearray({mb} << 20); b[::4096] = b'x' * len(b[::4096]); print('HELD', flush=True); sys.stdin.read()"
children = [subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for _ in range(n)]
print(sum(c.stdout.readline().startswith(b'HELD') for c in children), flush=True)
sys.stdin.read()
"""


def _tree(n: int, mb: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _TREE, str(n), str(mb)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def watchdog(monkeypatch):
    monkeypatch.setattr(_limits, "_PROBED", "watchdog")
    monkeypatch.setattr(_limits.Limits, "_v2", lambda self, name: False)
    monkeypatch.setattr(_limits.Limits, "_v1", lambda self, name: False)


def test_the_watchdog_stops_a_submission_whose_processes_together_pass_the_limit(watchdog):
    limits = _limits.Limits(memory_mb=250)
    assert limits.kind == "watchdog" and limits.groups == []
    process = _tree(n=2, mb=150)  # each child under the limit, the two together over it
    try:
        limits.watch(process.pid, lambda: _kill(process))
        code = process.wait(timeout=60)
    finally:
        _kill(process)
        limits.close()
    assert code == -signal.SIGKILL
    reason = limits.hit()
    assert reason is not None and "over the limit of 250 MiB" in reason and "held" in reason, reason


def test_the_watchdog_leaves_a_submission_under_the_limit_alone(watchdog):
    limits = _limits.Limits(memory_mb=1024)
    process = _tree(n=2, mb=100)
    try:
        limits.watch(process.pid, lambda: _kill(process))
        assert process.stdout is not None and process.stdout.readline().strip() == b"2"
        time.sleep(1.0)  # four looks of the watchdog while both children hold their memory
        assert process.poll() is None and limits.hit() is None
    finally:
        process.stdin.close()
        _kill(process)
        process.wait(timeout=30)
        limits.close()


def test_the_watchdog_counts_processes_too(watchdog):
    limits = _limits.Limits(memory_mb=0, processes=3)
    process = _tree(n=4, mb=1)
    try:
        limits.watch(process.pid, lambda: _kill(process))
        process.wait(timeout=60)
    finally:
        _kill(process)
        limits.close()
    reason = limits.hit()
    assert reason is not None and "over the limit of 3" in reason, reason


def test_the_summary_line_names_the_watchdog(watchdog):
    line = _limits.mechanism(1536)
    assert "watchdog" in line and "1536 MiB" in line
