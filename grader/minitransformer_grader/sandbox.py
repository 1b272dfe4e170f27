"""Running one submission in a sandbox, and talking to it (see :mod:`.runner` for the other side).

**The sandbox** (:func:`sandbox_argv`) is bubblewrap (``bwrap``, the tool Flatpak uses): new PID,
network, mount, IPC and UTS namespaces, every capability dropped, ``--die-with-parent`` and a new
session. Its file system holds only ``/usr`` (read-only), a few files of ``/etc`` (read-only), the
Python installation and its site-packages (read-only), the sandbox's copy of the package and of the
grader's runner (:class:`KernelPackage`, read-only), a private ``/proc`` (only the sandbox's
processes), a size-limited private ``/tmp`` and a writable work folder holding only the submission's
notebook.
No network, no view of the instructor's home, of the reference and the solutions, of the other
submissions or of the grader's processes, and an environment of a few variables (``--clearenv``).
The address-space, file-size and open-file limits are set on the ``bwrap`` process from outside
(``setrlimit`` before it starts; they pass to everything inside), and the grader enforces the time
limits: a byte on the interrupt channel, then SIGKILL of the whole sandbox, whose PID namespace
takes every process the submission started with it.

Without bubblewrap (``--no-sandbox``) the same runner starts as a plain process in a new session
and a private temporary folder, with the same limits and checks but the instructor's rights.

**The package copy** (:class:`KernelPackage`) has no checks, no reference and no answer key: its
``minitransformer.checks`` only holds do-nothing stand-ins of the check functions (the genuine
checks run in the grader's process, see :mod:`.remote`), its ``minitransformer_grader`` only the
runner and its protocol (:mod:`.runner`, :mod:`.protocol`), and every function or class of the
package that a task of the exercise asks the learner to write (the ``avoid`` list of its check) is
rewritten so that calling it raises: the learner's code cannot use it, read it or find it in
memory. PyTorch's own versions (``torch.nn.functional.scaled_dot_product_attention``...) cannot be
taken out of PyTorch; the runner replaces them while the grader calls the learner's code, which a
determined submission can undo (see docs/what_is_safe.md).
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

from .limits import Limits
from .scan import parse


def _learners_package() -> Path:
    """The folder of the installed ``minitransformer`` (a checkout's or site-packages'), found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("minitransformer")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the grader needs the course's package: pip install minitransformer")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


_PACKAGE = _learners_package()  # minitransformer/
_GRADER = Path(__file__).resolve().parent  # minitransformer_grader/
_RUNNER_FILES = ("protocol.py", "runner.py")  # the grader's modules that run in the sandbox
_COPIES = ("minitransformer", "minitransformer_grader")  # the folders of a KernelPackage
_INSIDE_PACKAGE = "/opt/minitransformer-grading"  # where the sandbox sees its copy of the package
_INSIDE_WORK = "/submission"
_TMP_SIZE = 256 << 20  # bytes of the sandbox's /tmp (memory)
_WORK_SIZE = 128 << 20  # bytes of the sandbox's work folder (memory, not the instructor's disk)
_SHM_SIZE = 64 << 20  # bytes of its /dev/shm
_FILE_SIZE = 128 << 20  # largest file a submission may write
_LIVE: set[subprocess.Popen] = set()  # sandboxes still going, killed by kill_all when grading stops early

INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
                "bubblewrap`), or run the grader inside a container (e.g. `docker run --rm --network none ...`) and "
                "pass --no-sandbox there")


def kill_all() -> None:
    """Kill every sandbox still going (and, through its PID namespace or session, what it started)."""
    for process in list(_LIVE):
        kill(process)


def kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------------------------
# The package copy the submission imports
# ------------------------------------------------------------------------------------------------

_POISON = '''"""Stand-ins for the pieces this exercise asks the learner to write (the grading sandbox only)."""

USED = []
SERVED = set()  # the pieces the grader computes while the running check calls the learner's code (its fixed list)


class ReferenceUsed(BaseException):
    """The learner's code called the package's (or PyTorch's) version of the piece a task asks for."""


def hit(label, why=""):
    USED.append(label)
    return ReferenceUsed(label + why)


def stub(label, target=None, why=""):
    """A stand-in that raises; while a check that lists ``target`` runs, the grader computes it instead."""
    def poisoned(*args, **kwargs):
        if target is not None and target in SERVED:
            from minitransformer_grader.runner import ask_served
            return ask_served(target, args, kwargs)
        raise hit(label, why)
    poisoned.__name__ = label
    return poisoned
'''

_CHECKS_STUB = '''"""The grading sandbox's stand-in: the checks run in the grader's own process, not here."""

CHECKS = {names!r}


def _stand_in(name):
    def check(*args, **kwargs):
        print(f"({{name}}: checked by the grader, outside this notebook)")
    check.__name__ = name
    return check


for _name in CHECKS:
    globals()[_name] = _stand_in(_name)
'''


def _poison_source(source: str, names: dict[str, str], module: str) -> str:
    """``source`` with each top-level function in ``names`` replaced by a stand-in that raises.

    ``names`` maps a function's name to the task that asks the learner to write it, for the message.
    The code of the function is not in the sandbox at all (not in memory, not on disk), so neither an
    alias, a default argument nor a copy of its code object can bring it back. Classes are not
    rewritten: the package's own models (which the checks hand to the learner's code, e.g. a
    Transformer for greedy decoding) are made of them; the runner disables the avoided classes while
    the learner's code answers their check (see :mod:`.runner`).
    """
    tree = parse(source)
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            label = f"minitransformer's {node.name}"
            why = (f" is not available in the grading sandbox: {names[node.name]} asks you to write it yourself "
                   "(build it from PyTorch operations)")
            body += parse(f"{node.name} = __import__('minitransformer.sandbox_stubs', fromlist=['stub']).stub("
                          f"{label!r}, {module + ':' + node.name!r}, {why!r})").body
            continue
        body.append(node)
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree))


class KernelPackage:
    """A private, read-only copy of ``minitransformer`` and the runner for the sandbox: no checks, no reference.

    The copy's pieces that the exercise asks the learner to write are poisoned (see the module docstring).

    Args:
        avoid: ``"minitransformer.module:Name"`` pieces the exercise asks the learner to write, each with the
            task that asks for it (a sequence of targets alone is read as "a task of this exercise").
        check_names: the names the stand-in ``minitransformer.checks`` defines.
    """

    def __init__(self, avoid: Sequence[str] | dict[str, str] = (), check_names: Sequence[str] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="minitransformer-sandbox-"))
        tasks = dict(avoid) if isinstance(avoid, dict) else {a: "a task of this exercise" for a in avoid}
        by_file: dict[Path, dict[str, str]] = {}
        for target, task in tasks.items():
            module, _, name = target.partition(":")
            if not module.startswith("minitransformer."):
                continue
            rel = Path(*module.split(".")[1:])
            path = rel.with_suffix(".py") if (_PACKAGE / rel.with_suffix(".py")).is_file() else rel / "__init__.py"
            by_file.setdefault(path, {})[name] = task
        self.files: dict[Path, bytes] = {}
        for p in sorted(_PACKAGE.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            rel = p.relative_to(_PACKAGE)
            if rel.parts[0] == "checks":
                continue  # the checks and the answer key stay in the grader's process
            data = p.read_bytes()
            if rel in by_file:
                data = _poison_source(data.decode("utf-8"), by_file[rel],
                                      ".".join(("minitransformer", *rel.with_suffix("").parts))).encode()
            self.files[Path("minitransformer", rel)] = data
        self.files[Path("minitransformer/checks/__init__.py")] = _CHECKS_STUB.format(names=sorted(check_names)).encode()
        self.files[Path("minitransformer/sandbox_stubs.py")] = _POISON.encode()
        # Of the grader, only the runner, its protocol and the recorder: no reference, no generator, no checks.
        self.files[Path("minitransformer_grader/__init__.py")] = b'"""The runner of the grading sandbox."""\n'
        for name in _RUNNER_FILES:
            self.files[Path("minitransformer_grader", name)] = (_GRADER / name).read_bytes()
        # The recorder of the operations the learner's code runs (the checks' lists of allowed operations).
        self.files[Path("minitransformer_grader/operations.py")] = (_PACKAGE / "checks" / "operations.py").read_bytes()
        self._write()

    def _write(self) -> None:
        import compileall

        for name in _COPIES:
            target = self.root / name
            if target.exists():
                for path in [target, *target.rglob("*")]:
                    path.chmod(stat.S_IRWXU)
                shutil.rmtree(target)
        for rel, data in self.files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for name in _COPIES:
            target = self.root / name
            compileall.compile_dir(str(target), quiet=1)
            for path in sorted(target.rglob("*"), reverse=True):
                path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (0o111 if path.is_dir() else 0))
            target.chmod(0o555)
        self.digest = self._digest()

    def _digest(self) -> str:
        h = hashlib.sha256()
        for name in _COPIES:
            for path in sorted((self.root / name).rglob("*")):
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


# ------------------------------------------------------------------------------------------------
# bubblewrap
# ------------------------------------------------------------------------------------------------

def _python_dirs() -> list[str]:
    """The folders the sandbox's Python needs: its installation, the environment and their site-packages."""
    dirs = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix,
            str(Path(os.path.realpath(sys.executable)).parent.parent)}
    dirs |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)}
    real = sorted({os.path.realpath(d) for d in dirs if d and os.path.isdir(d)})
    kept: list[str] = []
    for d in real:
        if d in ("/", "/usr") or d.startswith("/usr/") or any(d.startswith(k + "/") for k in kept):
            continue
        kept.append(d)
    # A virtual environment is found through the path of sys.executable, which may be a link: bind that path too.
    for d in (sys.prefix,):
        if os.path.isdir(d) and d not in kept and not d.startswith("/usr/"):
            kept.append(d)
    return kept


def _hidden(bound: Sequence[str]) -> list[str]:
    """The bwrap options that hide the checks and the grader wherever a bound folder holds them.

    With a regular install (``pip install . ./grader``, wheels) site-packages, bound read-only so that
    Python and PyTorch work, holds ``minitransformer/checks`` (the checks and the answer key) and
    ``minitransformer_grader`` (the reference): the sandbox's stripped copies are bound over them. A
    course checkout inside a bound folder (a virtual environment that holds it) loses its solutions,
    tests, exercises and example class to empty folders.
    """
    def inside(path: Path) -> bool:
        real = os.path.realpath(path)
        return any(real == d or real.startswith(d.rstrip("/") + "/") for d in bound)

    options: list[str] = []
    for real, name in ((_PACKAGE, "minitransformer"), (_GRADER, "minitransformer_grader")):
        if inside(real):
            options += ["--ro-bind", f"{{copy}}/{name}", str(real)]
    folders = [_PACKAGE.parent / name for name in ("solutions", "exercises", "tests", "notebooks", "examples", ".git")]
    for folder in [*folders, _GRADER.parent / "tests"]:
        if folder.is_dir() and inside(folder):
            options += ["--tmpfs", str(folder), "--remount-ro", str(folder)]
    return options


def sandbox_argv(package: KernelPackage, notebook_fd: int | None, command: Sequence[str],
                 env: dict[str, str]) -> list[str]:
    """The ``bwrap`` command line that runs ``command`` in the sandbox described in the module docstring.

    The work folder is a size-limited ``tmpfs`` (``notebook_fd``, a readable descriptor, is copied into
    it as ``submission.ipynb``): what the submission writes never reaches the instructor's disk.
    """
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "grading",
            "--ro-bind", "/usr", "/usr",
            # The private /tmp first: a Python environment that lives under /tmp (a checkout there, as on some
            # CI machines) is bound on top of it below, not hidden by it.
            "--size", str(_TMP_SIZE), "--tmpfs", "/tmp"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "passwd", "group",
                 "alternatives"):
        if os.path.exists(f"/etc/{name}"):
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    bound = ["/usr", *(os.path.realpath(top) for top in ("/bin", "/sbin", "/lib", "/lib64") if os.path.isdir(top))]
    for d in _python_dirs():
        argv += ["--ro-bind", d, d]
        bound.append(os.path.realpath(d))
    argv += [a.replace("{copy}", str(package.root)) for a in _hidden(bound)]
    argv += ["--ro-bind", str(package.root), _INSIDE_PACKAGE, "--proc", "/proc",
             "--dev", "/dev", "--size", str(_SHM_SIZE), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--size", str(_WORK_SIZE), "--tmpfs", _INSIDE_WORK]
    if notebook_fd is not None:
        argv += ["--file", str(notebook_fd), f"{_INSIDE_WORK}/submission.ipynb"]
    argv += ["--chdir", _INSIDE_WORK, "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--", *command]


_PROBE: tuple[bool, str] | None = None


def sandbox_available() -> tuple[bool, str]:
    """(whether bubblewrap runs here, why not): probed once by starting Python in an empty sandbox."""
    global _PROBE
    if _PROBE is not None:
        return _PROBE
    if shutil.which("bwrap") is None and not os.path.exists("/usr/bin/bwrap"):
        _PROBE = (False, "bubblewrap (bwrap) is not installed")
        return _PROBE
    package = KernelPackage()
    try:
        argv = sandbox_argv(package, None, [sys.executable, "-c", "import minitransformer, os; print(os.getpid())"],
                            {"PATH": "/usr/bin:/bin", "PYTHONPATH": _INSIDE_PACKAGE})
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode == 0 and done.stdout.strip() in ("1", "2", "3"):
            _PROBE = (True, "")
        else:
            why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            _PROBE = (False, f"bubblewrap is installed but cannot make a sandbox here ({why[:200]}); in a container it "
                             "needs the rights to create namespaces (e.g. docker run --security-opt seccomp=unconfined "
                             "--cap-add SYS_ADMIN), or grade inside the container with --no-sandbox")
    except (OSError, subprocess.TimeoutExpired) as err:
        _PROBE = (False, f"bubblewrap failed to start: {err}")
    finally:
        package.remove()
    return _PROBE


# ------------------------------------------------------------------------------------------------
# One submission's process
# ------------------------------------------------------------------------------------------------

class Output:
    """The submission's printed output, capped: the first and the last ``keep`` bytes, and how much was cut."""

    def __init__(self, keep: int = 8192) -> None:
        self.keep, self.head, self.tail, self.total = keep, bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.keep)]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        cut = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {cut:,} bytes of output cut ...]\n" if cut > 0 else ""
        return head + middle + self.tail.decode("utf-8", "replace")

    @property
    def cut(self) -> bool:
        return self.total > len(self.head) + len(self.tail)


def _limits(memory_mb: int, limits: Limits) -> Any:
    def apply() -> None:
        import resource

        for which, value in ((resource.RLIMIT_AS, memory_mb << 20 if memory_mb > 0 else None),
                             (resource.RLIMIT_FSIZE, _FILE_SIZE), (resource.RLIMIT_NOFILE, 1024),
                             (resource.RLIMIT_CORE, 0)):
            if value is None:
                continue
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass
        limits.enter()
    return apply if hasattr(os, "fork") else None


class Sandboxed:
    """A started submission process: its channels, its output, and how to stop it."""

    def __init__(self, package: KernelPackage, notebook: bytes | None, *, sandbox: bool, memory_mb: int) -> None:
        self.private = Path(tempfile.mkdtemp(prefix="submission-"))
        self.limits = Limits(memory_mb)
        self.limit_hit: str | None = None
        req_r, self.req_w = os.pipe()  # grader -> runner
        self.out_r, out_w = os.pipe()  # runner -> grader
        intr_r, self.intr_w = os.pipe()  # grader -> runner: interrupt
        passed = [req_r, out_w, intr_r]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "TQDM_DISABLE": "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-s", "-m", "minitransformer_grader.runner", str(req_r), str(out_w), str(intr_r)]
        if sandbox:
            env.update(HOME="/tmp", TMPDIR="/tmp", MPLCONFIGDIR="/tmp/matplotlib", PYTHONPATH=_INSIDE_PACKAGE)
            notebook_fd = self._notebook_fd(notebook) if notebook is not None else None
            if notebook_fd is not None:
                passed.append(notebook_fd)
            argv, cwd = sandbox_argv(package, notebook_fd, command, env), None
        else:
            work, home, tmp = self.private / "work", self.private / "home", self.private / "tmp"
            for folder in (work, home, tmp):
                folder.mkdir()
            if notebook is not None:
                (work / "submission.ipynb").write_bytes(notebook)
            env.update(HOME=str(home), TMPDIR=str(tmp), MPLCONFIGDIR=str(tmp / "matplotlib"),
                       PYTHONPATH=str(package.root))
            for key in ("SYSTEMROOT", "LD_LIBRARY_PATH"):
                if key in os.environ:
                    env[key] = os.environ[key]
            argv, cwd = command, work
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, cwd=cwd, env=env if not sandbox else {},
                                            pass_fds=passed, start_new_session=True,
                                            preexec_fn=_limits(memory_mb, self.limits))
        except BaseException:
            for fd in (*passed, self.req_w, self.out_r, self.intr_w):
                os.close(fd)
            self.limits.close()
            shutil.rmtree(self.private, ignore_errors=True)
            raise
        _LIVE.add(self.process)
        for fd in passed:
            os.close(fd)
        self.limits.watch(self.process.pid, lambda: kill(self.process))
        self.output = Output()
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()

    def _notebook_fd(self, notebook: bytes) -> int:
        """A descriptor to read the notebook from (bwrap copies it into the sandbox's work folder)."""
        path = self.private / "submission.ipynb"
        path.write_bytes(notebook)
        fd = os.open(path, os.O_RDONLY)
        path.unlink()
        return fd

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        while True:
            chunk = self.process.stdout.read1(65536) if hasattr(self.process.stdout, "read1") else \
                self.process.stdout.read(65536)
            if not chunk:
                return
            self.output.add(chunk)

    def interrupt(self) -> None:
        try:
            os.write(self.intr_w, b"!")
        except OSError:
            pass

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> int | None:
        """Kill what is left, wait for it, close the channels and remove the private folder."""
        kill(self.process)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.limit_hit = self.limits.hit()
        self.limits.close()
        _LIVE.discard(self.process)
        self._reader.join(timeout=5)
        for fd in (self.req_w, self.out_r, self.intr_w):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.private, ignore_errors=True)
        return code
