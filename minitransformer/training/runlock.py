"""One writer per run folder: ``<out>/.lock`` names the process holding it (lesson 07).

The lock is an ``flock``, which the operating system drops when a process dies (even by ``kill -9``), so a lock
left by a dead run is taken over with a note; where there is no ``flock`` (Windows) the recorded process id decides.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..utils import OutputError, writable_folder

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"


class RunFolderLocked(FileExistsError):
    """Another live process is writing into this run folder."""


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts it (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22 of proc(5), counted after the command name


def _alive(owner: dict[str, Any]) -> bool:
    """True unless the recorded owner is certainly gone (its pid is not running on this host)."""
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    if owner.get("host") != socket.gethostname():
        return True  # cannot look at another machine's processes: assume it still runs
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    started = owner.get("started")
    return started is None or _start_time(pid) in (None, started)


def _describe(owner: dict[str, Any]) -> str:
    if not owner:
        return "another process (which has not written its process id yet)"
    since = owner.get("since")
    when = f" (since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))})" if isinstance(since, int) else ""
    return f"process {owner.get('pid')} on {owner.get('host')}{when}"


class RunLock:
    """An exclusive lock on a run folder, held from :meth:`acquire` to :meth:`release`."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.note: str | None = None
        self._fd: int | None = None

    def acquire(self) -> str | None:
        """Take the lock."""
        writable_folder(self.folder, "run folder")
        for _ in range(100):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as error:
                raise OutputError(f"cannot create the lock file {self.path}: {error.strerror}", error.errno) from error
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    owner = _read(fd)
                    os.close(fd)
                    raise self._refusal(owner) from None
                try:
                    same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if not same:  # the holder released and removed it while we waited: try the new file
                    os.close(fd)
                    continue
            owner = _read(fd)
            if owner and owner.get("pid") != os.getpid() and _alive(owner):
                os.close(fd)
                raise self._refusal(owner)
            try:
                self._write(fd)
                self._fd = fd
            except BaseException:
                # Ctrl-C (or a full disk) while our record is written: leave no lock file naming this process.
                self._fd = fd
                self.release()
                raise
            self.note = None
            if owner and owner.get("pid") != os.getpid():
                self.note = (f"took over the lock of {self.folder} left by {_describe(owner)}, "
                             "which is no longer running")
            return self.note
        raise RunFolderLocked(f"could not lock {self.folder}: its lock file {self.path} keeps changing")

    def release(self) -> None:
        """Give the lock back and remove the lock file (safe to call twice)."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before closing: no one can hold the old file's flock meanwhile
        except OSError:
            pass  # Windows removes no open file; done after closing below
        finally:
            os.close(self._fd)
            self._fd = None
        if fcntl is None:
            self.path.unlink(missing_ok=True)

    def _refusal(self, owner: dict[str, Any]) -> RunFolderLocked:
        return RunFolderLocked(
            f"the run folder {self.folder} is in use by {_describe(owner)}: wait for it to finish, stop it, "
            f"or choose another --out (if no run is using it, delete {self.path})"
        )

    @staticmethod
    def _write(fd: int) -> None:
        pid = os.getpid()
        record = {"pid": pid, "host": socket.gethostname(), "started": _start_time(pid), "since": round(time.time())}
        data = (json.dumps(record) + "\n").encode()
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        os.fsync(fd)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    """The owner recorded in an open lock file; {} when empty or unreadable (a crash while writing it)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 4096)
        owner = json.loads(data.decode()) if data.strip() else {}
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}
