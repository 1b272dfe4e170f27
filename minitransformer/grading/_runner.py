"""The process that runs one submission for the grader: ``python -m minitransformer.grading._runner FD MEMORY_MB``.

It reads a plan (JSON on stdin: the submission's code cells and the reference check cells, in
order), runs it in an IPython shell (no Jupyter kernel, so no network port and no TCP warning),
and writes one JSON line per event to the pipe ``FD``. The grader (:mod:`._sandbox`) starts it in
a new session, in a private temporary folder, and enforces the time limits by signals.

First the process forks: the learner's code runs in the child, whose parent is this small waiting
process, so ``os.kill(os.getppid(), 9)`` ends the waiting process, not the grader.

The check cells run after the learner's cells, in a namespace built from the learner's names
overlaid with the genuine checks, captured before any learner code ran. Before each check the
runner verifies that the learner has not rebound a check or ``minitransformer``, nor replaced a
function of the package, of torch or of the builtins; a task whose check would run on tampered
code scores 0 with a message. A submission written to subvert the interpreter itself can still
defeat this (it runs in the same process): run the grader in a container for a class.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import signal
import sys
import time
import types
from typing import Any, Callable

_MAX_OUTPUT = 20_000  # characters of a check's printed output kept
_TORCH_WATCHED = frozenset({"allclose", "equal", "isclose", "isnan", "isfinite", "testing", "no_grad", "tensor", "zeros",
                            "ones", "full", "arange", "randn", "rand", "randint", "Generator", "softmax", "log_softmax",
                            "where", "cat", "stack", "Tensor"})


class _Sink(io.TextIOBase):
    """A bounded text stream: keeps the first characters written, drops the rest."""

    def __init__(self, limit: int = _MAX_OUTPUT) -> None:
        self.parts: list[str] = []
        self.size, self.limit = 0, limit

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.size < self.limit:
            self.parts.append(text[: self.limit - self.size])
            self.size += len(self.parts[-1])
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


def _limit_memory(megabytes: int) -> None:
    if megabytes <= 0:
        return
    try:
        import resource

        limit = megabytes << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not on this OS: the container's limit applies
        pass


def _snapshot(modules: list[types.ModuleType]) -> dict[tuple[str, str], tuple[Any, Any]]:
    """Identity of every function and class (and its methods) of ``modules``."""
    seen: dict[tuple[str, str], tuple[Any, Any]] = {}
    for module in modules:
        for name, value in list(vars(module).items()):
            if callable(value) or isinstance(value, types.ModuleType):
                seen[(module.__name__, name)] = (value, getattr(value, "__code__", None))
            if isinstance(value, type) and value.__module__.startswith("minitransformer"):
                for attr, member in vars(value).items():
                    if isinstance(member, types.FunctionType):
                        seen[(f"{module.__name__}.{name}", attr)] = (member, member.__code__)
    return seen


def _changed(before: dict[tuple[str, str], tuple[Any, Any]], owners: dict[str, Any]) -> list[str]:
    changed = []
    for (owner, name), (value, code) in before.items():
        space = owners.get(owner)
        if space is None:
            continue
        now = vars(space).get(name, None)
        if now is not value or getattr(now, "__code__", None) is not code:
            changed.append(f"{owner}.{name}")
    return changed


def _error(err: BaseException) -> dict[str, Any]:
    info = {"ename": type(err).__name__, "evalue": str(err)}
    if isinstance(err, SyntaxError):
        info["lineno"] = err.lineno
        info["evalue"] = err.msg
    return info


def _statements(source: str) -> list[str]:
    tree = ast.parse(source)
    return [ast.get_source_segment(source, node) or "" for node in tree.body]


def _run(plan: dict[str, Any], emit: Callable[..., None]) -> None:
    import torch

    torch.set_num_threads(int(plan.get("threads", 1)))
    import minitransformer
    import minitransformer.grading as grading
    from IPython.core.interactiveshell import InteractiveShell

    genuine = {name: getattr(grading, name) for name in dir(grading) if name.startswith("check_")}
    watched = [m for n, m in sorted(sys.modules.items()) if n == "minitransformer" or n.startswith("minitransformer.")]
    watched_names = {m.__name__: m for m in watched}
    extra = [builtins, torch, torch.Tensor, torch.nn.Module]
    owners: dict[str, Any] = {**watched_names, **{getattr(m, "__name__", str(m)): m for m in extra}}
    for module in watched:
        for name, value in vars(module).items():
            if isinstance(value, type) and value.__module__.startswith("minitransformer"):
                owners[f"{module.__name__}.{name}"] = value
    shell = InteractiveShell.instance()
    shell.user_ns["__name__"] = "__main__"
    before = _snapshot([*watched, *extra])  # after IPython has set up its builtins
    # Of torch's own namespace only what the checks compare with: importing torch._dynamo (which an
    # optimizer does) legitimately rewraps other functions such as torch.manual_seed.
    before = {k: v for k, v in before.items() if k[0] != "torch" or k[1] in _TORCH_WATCHED}
    modules_before = dict(watched_names)
    for index, cell in enumerate(plan["cells"]):
        emit(event="start", cell=index)
        if cell["kind"] == "code":
            sink = _Sink()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                result = shell.run_cell(cell["source"], store_history=False, silent=False)
            err = result.error_before_exec or result.error_in_exec
            emit(event="done", cell=index, error=_error(err) if err is not None else None)
            continue
        parts = []
        for statement in _statements(cell["source"]):
            flags = []
            used = {n.id for n in ast.walk(ast.parse(statement)) if isinstance(n, ast.Name)}
            for name in sorted(used & set(genuine)):
                if name in shell.user_ns and shell.user_ns[name] is not genuine[name]:
                    flags.append(f"the submission redefines `{name}`, the grader's check")
            if "minitransformer" in shell.user_ns and shell.user_ns["minitransformer"] is not minitransformer:
                flags.append("the submission rebinds the name `minitransformer`")
            swapped = [n for n, m in modules_before.items() if sys.modules.get(n) is not m]
            if swapped:
                flags.append(f"the submission replaced the module {swapped[0]}")
            tampered = _changed(before, owners)
            if tampered:
                shown = ", ".join(tampered[:3]) + (", ..." if len(tampered) > 3 else "")
                flags.append(f"the submission changed code the checks rely on ({shown})")
            if flags:
                parts.append({"passed": False, "flagged": True,
                              "message": "; ".join(flags) + ": this task scores 0"})
                continue
            space = dict(shell.user_ns)
            space.update(genuine)
            space["minitransformer"] = minitransformer
            sink = _Sink()
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    exec(compile(statement, f"<check {cell['grade_id']}>", "exec"), space)
            except KeyboardInterrupt:
                parts.append({"passed": False, "message": "timed out: the check was interrupted", "timeout": True})
            except BaseException as err:  # noqa: BLE001 - anything the learner's code raised fails the part
                parts.append({"passed": False, "message": f"{type(err).__name__}: {err}"})
            else:
                text = sink.getvalue()
                line = next((ln for ln in text.splitlines() if ln.startswith("✓")), "passed")
                parts.append({"passed": True, "message": line})
        emit(event="done", cell=index, parts=parts)
    emit(event="end")


def main() -> None:
    fd, megabytes = int(sys.argv[1]), int(sys.argv[2])
    child = os.fork() if hasattr(os, "fork") else 0  # no fork (Windows): the learner's code runs here
    if child:  # the waiting parent: it only reports how the child ended
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    _limit_memory(megabytes)
    channel = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
    plan = json.loads(sys.stdin.read())
    nonce = plan.pop("nonce")

    def emit(**event: Any) -> None:
        event.update(nonce=nonce, time=time.time())
        channel.write(json.dumps(event) + "\n")
        channel.flush()

    try:
        _run(plan, emit)
    except BaseException as err:  # noqa: BLE001 - report why the runner stopped, then stop
        emit(event="crash", error=_error(err))
    finally:
        channel.close()
        os._exit(0)


if __name__ == "__main__":
    main()
