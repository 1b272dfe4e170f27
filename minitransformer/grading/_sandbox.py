"""Running one submission's plan in its own process, with time and memory limits (see :mod:`._runner`).

* The runner starts in a new session (its own process group), in a private temporary folder that is
  deleted afterwards, with one thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``) and an
  address-space limit where the OS has one.
* It imports the package from :class:`PackageCopy`, a read-only copy made when grading starts and
  verified after every submission, so a submission that rewrites the package's files (checks or
  reference) cannot change how the next one is graded.
* A cell that runs past its limit gets SIGINT, then SIGKILL for the whole group after a grace
  period; the whole submission gets SIGKILL at its own limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parents[1]  # minitransformer/
_GRACE = 5.0  # seconds between SIGINT and SIGKILL
_ENV_KEPT = frozenset({"PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX",
                       "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "SYSTEMROOT"})
_LIVE: set[subprocess.Popen] = set()  # runners still going, killed by kill_all when grading stops early


def kill_all() -> None:
    """Kill every runner still going (and what it started in its session)."""
    for process in list(_LIVE):
        _kill(process, signal.SIGKILL)


class PackageCopy:
    """A private, read-only copy of the ``minitransformer`` package for the runners to import."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="minitransformer-grader-"))
        self.files = {p.relative_to(_PACKAGE): p.read_bytes() for p in sorted(_PACKAGE.rglob("*"))
                      if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
        self._write()

    def _write(self) -> None:
        target = self.root / "minitransformer"
        if target.exists():
            for path in [target, *target.rglob("*")]:
                path.chmod(stat.S_IRWXU)
            shutil.rmtree(target)
        for rel, data in self.files.items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        import compileall

        compileall.compile_dir(str(target), quiet=1)
        for path in sorted(target.rglob("*"), reverse=True):
            path.chmod(stat.S_IRUSR | (stat.S_IXUSR if path.is_dir() else 0))
        target.chmod(stat.S_IRUSR | stat.S_IXUSR)
        self.digest = self._digest()

    def _digest(self) -> str:
        h = hashlib.sha256()
        for path in sorted((self.root / "minitransformer").rglob("*")):
            h.update(str(path.relative_to(self.root)).encode())
            if path.is_file():
                h.update(path.read_bytes())
        return h.hexdigest()

    def intact(self) -> bool:
        """True when the copy is as written; otherwise it is written again and False returned."""
        try:
            ok = self._digest() == self.digest
        except OSError:
            ok = False
        if not ok:
            self._write()
        return ok

    def remove(self) -> None:
        for path in [self.root, *self.root.rglob("*")]:
            try:
                path.chmod(stat.S_IRWXU)
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class RunResult:
    """What came back from one run: the event of each cell, and how the run ended."""

    events: dict[int, dict[str, Any]] = field(default_factory=dict)
    timed_out_cells: list[int] = field(default_factory=list)
    notebook_timeout: bool = False
    ended: bool = False
    crash: dict[str, Any] | None = None
    exit_code: int | None = None
    stderr: str = ""


def _kill(process: subprocess.Popen, sig: int) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)
        elif sig != signal.SIGINT:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def run_plan(plan: dict[str, Any], package: PackageCopy, *, cell_timeout: float, notebook_timeout: float,
             memory_mb: int) -> RunResult:
    """Run ``plan`` (cells, see :mod:`._runner`) in a fresh, limited process and collect its events."""
    if cell_timeout <= 0 or notebook_timeout <= 0:
        raise ValueError("time limits must be > 0 seconds")
    nonce = secrets.token_hex(16)
    private = Path(tempfile.mkdtemp(prefix="submission-"))  # the working folder, a home and a temp folder
    workdir, home, tmp = private / "work", private / "home", private / "tmp"
    for folder in (workdir, home, tmp):
        folder.mkdir()
    # Only what Python and torch need: the instructor's other variables (tokens, keys) stay out of reach.
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEPT or k.startswith("LC_")}
    env.update(PYTHONPATH=os.pathsep.join([str(package.root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", TQDM_DISABLE="1",
               MPLBACKEND="Agg", TMPDIR=str(tmp), HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    read_end, write_end = os.pipe()
    result = RunResult()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "minitransformer.grading._runner", str(write_end), str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, cwd=workdir, env=env,
            pass_fds=(write_end,), start_new_session=True)
        _LIVE.add(process)
        os.close(write_end)
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps({**plan, "nonce": nonce}).encode())
            process.stdin.close()
        except BrokenPipeError:
            pass
        start = time.monotonic()
        cell_start, current, interrupted_at = start, None, None
        buffer = b""
        with os.fdopen(read_end, "rb", buffering=0) as channel:
            while True:
                now = time.monotonic()
                deadlines = [start + notebook_timeout]
                if current is not None:
                    deadlines.append(cell_start + cell_timeout if interrupted_at is None else interrupted_at + _GRACE)
                wait = max(0.0, min(deadlines) - now)
                ready, _, _ = select.select([channel], [], [], wait)
                if ready:
                    chunk = channel.read(65536)
                    if not chunk:
                        break
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        try:
                            event = json.loads(line)
                        except ValueError:
                            continue
                        if event.get("nonce") != nonce:
                            continue  # not written by the runner
                        if event["event"] == "start":
                            current, cell_start, interrupted_at = event["cell"], time.monotonic(), None
                        elif event["event"] == "done":
                            result.events[event["cell"]] = event
                            current = None
                        elif event["event"] == "end":
                            result.ended = True
                        elif event["event"] == "crash":
                            result.crash = event.get("error")
                    continue
                now = time.monotonic()
                if now >= start + notebook_timeout:
                    result.notebook_timeout = True
                    break
                if current is not None and interrupted_at is None and now >= cell_start + cell_timeout:
                    result.timed_out_cells.append(current)
                    interrupted_at = now
                    _kill(process, signal.SIGINT)
                elif interrupted_at is not None and now >= interrupted_at + _GRACE:
                    break  # the cell ignored the interrupt
        _kill(process, signal.SIGKILL)  # the runner, and anything it started in its session
        try:
            result.exit_code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        _LIVE.discard(process)
        errors.seek(0)
        result.stderr = errors.read()[-2000:].decode("utf-8", "replace")
    shutil.rmtree(private, ignore_errors=True)
    return result
