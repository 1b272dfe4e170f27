"""Memory and process-count limits for a whole submission (every process it starts), not per process.

Three ways, the first that works on this machine (:func:`mechanism` says which, for the summary line):

* **cgroup v2**: a child cgroup per submission with ``memory.max``, ``memory.swap.max`` and ``pids.max``;
* **cgroup v1**: the same in the ``memory`` and ``pids`` hierarchies (``memory.limit_in_bytes``,
  ``memory.memsw.limit_in_bytes`` where swap is accounted, ``pids.max``);
* **a watchdog**, where no cgroup can be made (no rights, nothing mounted): every process keeps the
  per-process address-space limit (``RLIMIT_AS``, set in :mod:`.sandbox`), and a thread of the grader
  sums the resident memory of the submission's processes (their tree under the sandbox's process)
  four times a second and kills the submission when the total passes the limit or the processes
  outnumber the limit. Between two looks a submission can briefly go over; ``RLIMIT_NPROC`` is no
  help here, since it counts per user and is not applied to root.

A cgroup's memory count includes the pages of the sandbox's ``tmpfs`` folders the submission wrote;
the watchdog sees only resident memory, so with it the ``tmpfs`` sizes (bounded in :mod:`.sandbox`)
come on top.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

MAX_PROCESSES = 128  # processes (with cgroups: tasks, threads included) of one submission
_ROOT = Path("/sys/fs/cgroup")
_COUNTER = itertools.count()
_PROBED: str | None = None


def _own(hierarchy: str) -> str:
    """This process's cgroup path in ``hierarchy`` ("" for v2's unified one), from /proc/self/cgroup."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers.split(",") == [hierarchy] or (hierarchy == "" and controllers == ""):
                return path.lstrip("/")
    except (OSError, ValueError):
        pass
    return ""


def _make_child(base: Path, name: str, files: dict[str, str]) -> Path | None:
    """A new cgroup ``base/name`` with ``files`` written in it, or None (removed again) when any step fails."""
    child = base / name
    try:
        child.mkdir()
    except OSError:
        return None
    try:
        for file, value in files.items():
            if (child / file).exists() or not file.endswith("swap.max") and "memsw" not in file:
                (child / file).write_text(value)
        return child
    except OSError:
        _remove(child)
        return None


def _remove(group: Path) -> None:
    for _ in range(50):
        try:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


class Limits:
    """The limits of one submission: made before it starts, entered by its first process, removed after."""

    def __init__(self, memory_mb: int, processes: int = MAX_PROCESSES) -> None:
        self.memory = memory_mb << 20 if memory_mb > 0 else 0
        self.processes = processes
        self.groups: list[Path] = []
        self.kind = "watchdog"
        self.exceeded: str | None = None
        self._stop = threading.Event()
        name = f"minitransformer-grading-{os.getpid()}-{next(_COUNTER)}"
        if _PROBED in (None, "cgroup v2") and self._v2(name):
            self.kind = "cgroup v2"
        elif _PROBED in (None, "cgroup v1") and self._v1(name):
            self.kind = "cgroup v1"

    def _v2(self, name: str) -> bool:
        if not (_ROOT / "cgroup.controllers").exists():
            return False
        files = {"pids.max": str(self.processes)}
        if self.memory:
            files.update({"memory.max": str(self.memory), "memory.swap.max": "0"})
        for base in (_ROOT / _own(""), _ROOT):
            group = _make_child(base, name, files)
            if group is not None and all((group / f).exists() for f in files if not f.endswith("swap.max")):
                self.groups = [group]
                return True
            if group is not None:
                _remove(group)
        return False

    def _v1(self, name: str) -> bool:
        made: list[Path] = []
        wanted = {"pids": {"pids.max": str(self.processes)}}
        if self.memory:
            wanted["memory"] = {"memory.limit_in_bytes": str(self.memory),
                                "memory.memsw.limit_in_bytes": str(self.memory)}
        for hierarchy, files in wanted.items():
            root = _ROOT / hierarchy
            group = next((g for g in (_make_child(b, name, files) for b in (root / _own(hierarchy), root)
                                      if b.is_dir()) if g is not None), None)
            if group is None:
                for g in made:
                    _remove(g)
                return False
            made.append(group)
        self.groups = made
        return True

    def enter(self) -> None:
        """Put the calling process in the cgroups (run in the sandbox's first process, before it starts anything)."""
        for group in self.groups:
            with open(group / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    def watch(self, root_pid: int, kill: Callable[[], None]) -> None:
        """Without cgroups: a thread that kills the submission when its processes pass the limits."""
        if self.kind != "watchdog":
            return
        thread = threading.Thread(target=self._watch, args=(root_pid, kill), daemon=True)
        thread.start()

    def _watch(self, root_pid: int, kill: Callable[[], None]) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(0.25):
            pids = _tree(root_pid)
            if not pids:
                return
            rss = sum(_resident(p) for p in pids) * page
            if self.memory and rss > self.memory:
                self.exceeded = f"its processes held {rss >> 20:,} MiB together, over the limit of {self.memory >> 20:,} MiB"
            elif len(pids) > self.processes:
                self.exceeded = f"it ran {len(pids)} processes, over the limit of {self.processes}"
            if self.exceeded:
                kill()
                return

    def hit(self) -> str | None:
        """Why the submission was stopped by a limit, or None."""
        if self.exceeded or self.kind == "watchdog":
            return self.exceeded
        for group in self.groups:
            for kind, sources in _EVENT_COUNTERS:
                if _first_counter(group, sources):
                    limit = f"{self.memory >> 20:,} MiB of memory" if kind == "memory" else f"{self.processes} processes"
                    return f"it reached its limit of {limit} ({self.kind})"
        return None

    def close(self) -> None:
        self._stop.set()
        for group in self.groups:
            _remove(group)


# Counters of events, not of pressure: a process killed for memory, or a fork refused. For each
# limit the first file that a group has and that holds the key is read: v2's memory.events, v1's
# memory.oom_control, and v1's memory.failcnt only on kernels older than 4.13, whose oom_control
# has no oom_kill line (failcnt also counts the page cache that an honest submission's file reads
# leave reclaimed at the limit).
_EVENT_COUNTERS = (
    ("memory", (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill"), ("memory.failcnt", ""))),
    ("processes", (("pids.events", "max"),)),
)


def _first_counter(group: Path, sources: tuple[tuple[str, str], ...]) -> int | None:
    """The count of the first (file, key) of ``sources`` that ``group`` has; None when it has none."""
    for file, key in sources:
        try:
            count = _counter((group / file).read_text(), key)
        except OSError:
            continue
        if count is not None:
            return count
    return None


def _counter(text: str, key: str) -> int | None:
    """The number on the line ``key`` of a cgroup file (the whole file when ``key`` is empty); None when absent."""
    if not key:
        return int(text.strip() or 0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value or 0)
    return None


def _tree(root: int) -> list[int]:
    """``root`` and every process descended from it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in children or os.path.exists(f"/proc/{pid}"):
            found.append(pid)
            todo += children.get(pid, [])
    return found


def _resident(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def mechanism(memory_mb: int) -> str:
    """How a submission's memory and processes are limited on this machine (one line), probed once."""
    global _PROBED
    if _PROBED is None:
        probe = Limits(max(memory_mb, 1))
        _PROBED = probe.kind
        probe.close()
    if _PROBED == "watchdog":
        return (f"memory {memory_mb} MiB per process (RLIMIT_AS) and per submission by a watchdog summing its "
                f"processes' resident memory; at most {MAX_PROCESSES} processes (watchdog); no cgroup could be made")
    memory = f"memory {memory_mb} MiB per submission" if memory_mb else "no memory limit"
    return f"{memory} and at most {MAX_PROCESSES} tasks, by one {_PROBED} group per submission"
