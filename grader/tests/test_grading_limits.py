"""The per-submission limits of :mod:`minitransformer_grader.limits`, each mechanism tested on its own.

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

from minitransformer_grader import limits as _limits

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


# The cgroup mechanisms, on a machine that lets this user make cgroups (v1 or v2).

@pytest.fixture
def cgroup():
    limits = _limits.Limits(memory_mb=64, processes=8)
    if limits.kind == "watchdog":
        limits.close()
        pytest.skip("this machine lets no cgroup be made: the grader uses the watchdog, tested above")
    yield limits
    limits.close()


def _run_in(limits: _limits.Limits, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], preexec_fn=limits.enter, capture_output=True, timeout=120,
                          check=False)


def test_a_cgroup_names_its_memory_limit_when_a_process_is_killed_for_memory(cgroup):
    done = _run_in(cgroup, "b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096]); print('HELD')")
    assert done.returncode == -signal.SIGKILL and b"HELD" not in done.stdout, done
    reason = cgroup.hit()
    assert reason is not None and "64 MiB of memory" in reason and cgroup.kind in reason, reason


def test_a_cgroup_does_not_count_the_page_cache_of_an_honest_submission(cgroup, tmp_path):
    # Writing and reading 256 MiB of file under a 64 MiB limit: the kernel reclaims the file's
    # pages at the limit (v1 counts that in memory.failcnt) but kills nothing.
    code = f"""
import os
path = {str(tmp_path / 'big')!r}
with open(path, 'wb') as f:
    for _ in range(256):
        f.write(bytes(1 << 20))
    f.flush()
    os.fsync(f.fileno())
with open(path, 'rb') as f:
    while f.read(1 << 20):
        pass
print('DONE')
"""
    done = _run_in(cgroup, code)
    assert done.returncode == 0 and done.stdout.strip() == b"DONE", done
    assert cgroup.hit() is None


def test_a_cgroup_names_its_process_limit_when_a_fork_is_refused(cgroup):
    process = subprocess.run([sys.executable, "-c", _TREE, "12", "1"], preexec_fn=cgroup.enter, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=120, check=False)
    assert process.returncode != 0, process  # the parent could not start its 12 children under 8 processes
    reason = cgroup.hit()
    assert reason is not None and "8 processes" in reason, reason


def test_failcnt_is_read_only_where_oom_control_has_no_oom_kill_line(tmp_path):
    memory = dict(_limits._EVENT_COUNTERS)["memory"]
    (tmp_path / "memory.failcnt").write_text("7\n")  # page cache reclaimed at the limit, no process killed
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert _limits._first_counter(tmp_path, memory) == 0
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")  # a kernel before 4.13
    assert _limits._first_counter(tmp_path, memory) == 7


def test_the_docs_state_the_sandbox_tmp_size():
    """exercises/README.md once said 512 MiB while the sandbox mounts 256 MiB (review E-new-7)."""
    from pathlib import Path

    from minitransformer_grader import sandbox
    root = Path(__file__).resolve().parents[2]
    size = f"{sandbox._TMP_SIZE >> 20} MiB"
    assert f"`/tmp` ({size})" in (root / "exercises" / "README.md").read_text()
    assert f"{size} `/tmp`" in (root / "docs" / "what_is_safe.md").read_text()
