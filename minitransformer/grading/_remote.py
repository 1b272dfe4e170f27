"""The grader's side of a submission's run: the checks run here, the learner's code runs in the sandbox.

Each check function (``check_*``) has two halves that it already kept apart: it draws inputs from
its own seeded generator, hands them to the learner's code through :func:`._common._call` (or
builds the learner's module through :func:`._common._build`), and compares what came back with
the package's reference, with the tolerance and the known-mistake diagnosis of :func:`._common._compare`.
When grading, the whole check runs in the grader's process; only the call of the learner's code
crosses into the sandbox. The learner's functions and classes arrive here as proxies:

* a function or a class becomes :class:`RemoteCallable`: calling it sends the arguments (a pickle:
  the sandbox trusts the grader) and receives the result as plain data (``torch.load(...,
  weights_only=True)``: tensors, numbers, strings, containers);
* a module built by the learner's class becomes :class:`RemoteModule`, an ``nn.Module`` with the
  same sub-modules, parameters (shared ones stay shared), buffers and simple attributes. The check
  fills and inspects it here; calling it sends its parameters and train/eval flags along, so the
  learner's module computes with what the check set;
* a function of the check's own that the learner's code must call (a toy model's next-token
  scores) stays here: the sandbox calls back, with plain data.

Tensors the learner's code changed in place come back too, so "changed its inputs" is still seen.
An error in the learner's code comes back as its type and message; a call of a piece the task asks
the learner to write (poisoned in the sandbox's package copy) comes back as such and fails the
task: a report from the sandbox can only lower a score. Nothing else the sandbox says is trusted:
a grade is what the check concluded here from the outputs it compared itself.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import io
import pickle
import threading
import time
import types
from typing import Any, Callable

import torch
from torch import nn

from . import _common
from ._runner import _tensors  # one definition: the tensors a call may change in place
from ._protocol import Closed, TooLarge, load_plain, read_frame, write_frame

__all__ = ["CHECK_LOCK", "CheckTimeout", "KernelGone", "Link", "run_check_cell"]

CHECK_LOCK = threading.Lock()  # the checks use module-level state (sentinel tables, torch's RNG): one at a time
_GRACE = 5.0


class CheckTimeout(BaseException):
    """The learner's code ran past the check cell's time limit (and was interrupted)."""


class KernelGone(BaseException):
    """The submission's process died, ignored an interrupt, or sent something the grader refuses."""


class Link:
    """Requests to the submission's runner, with the check cell's deadline."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.deadline: float | None = None
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.dead: str | None = None
        self.forbidden: set[str] = set()  # the pieces the running check asks the learner to write

    def _read(self, deadline: float | None) -> tuple[dict[str, Any], bytes]:
        try:
            return read_frame(self.box.out_r, deadline)
        except (Closed, TooLarge, ValueError, OSError) as err:
            self.dead = f"the submission's process stopped answering ({err})"
            raise KernelGone(self.dead) from None

    def request(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict[str, Any], Any]:
        """Send a request and wait for its answer (serving the sandbox's callbacks meanwhile)."""
        if self.dead:
            raise KernelGone(self.dead)
        try:
            write_frame(self.box.req_w, header, payload)
        except OSError:
            self.dead = "the submission's process died"
            raise KernelGone(self.dead) from None
        interrupted = False
        while True:
            deadline = self.deadline if not interrupted else time.monotonic() + _GRACE
            try:
                answer, data = self._read(deadline)
            except TimeoutError:
                if interrupted:
                    self.dead = "the learner's code ignored the interrupt after its time limit"
                    raise KernelGone(self.dead) from None
                self.box.interrupt()
                interrupted = True
                continue
            if answer.get("event") == "callback":
                self._callback(answer, data)
                continue
            if answer.get("event") == "piece":
                self.piece(answer, data)
                continue
            if interrupted or (answer.get("op") == "error" and answer.get("kind") == "interrupt"):
                raise CheckTimeout("interrupted")  # even an answer that came after the limit
            try:
                return answer, load_plain(data) if data else None
            except Exception as err:  # noqa: BLE001 - anything but plain data is refused
                self.dead = f"the submission's process sent data the grader refuses ({type(err).__name__})"
                raise KernelGone(self.dead) from None

    def piece(self, header: dict[str, Any], data: bytes) -> None:
        """Compute a package piece taken out of the sandbox, unless the running check asks the learner to write it."""
        import importlib

        target = str(header.get("target", ""))
        try:
            if target in self.forbidden or not target.startswith("minitransformer."):
                raise PermissionError(target)
            module_name, _, attr = target.partition(":")
            function = getattr(importlib.import_module(module_name), attr)
            call = load_plain(data)
            with torch.no_grad():
                result = function(*call["args"], **call["kwargs"])
            write_frame(self.box.req_w, {"op": "piece_result"}, pickle.dumps(result))
        except Exception:  # noqa: BLE001 - refused, or the learner's arguments do not fit: the piece raises there
            write_frame(self.box.req_w, {"op": "piece_refused"})

    def _callback(self, header: dict[str, Any], data: bytes) -> None:
        try:
            call = load_plain(data)
            result = self.callbacks[int(header["id"])](*call["args"], **call["kwargs"])
            write_frame(self.box.req_w, {"op": "callback_result"}, pickle.dumps(result))
        except Exception as err:  # noqa: BLE001 - the learner passed something the check's function refuses
            write_frame(self.box.req_w, {"op": "callback_error", "error": f"{type(err).__name__}: {err}"[:500]})


class _Pickler(pickle.Pickler):
    """Arguments for the sandbox: the learner's objects by handle, the check's own functions as callbacks."""

    def __init__(self, file: Any, link: Link) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.link = link

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, RemoteModule):
            return ("h", obj._remote_handle, obj._remote_path)
        if isinstance(obj, RemoteCallable):
            return ("h", obj.handle, "")
        if isinstance(obj, type):
            return None
        local = isinstance(obj, (types.FunctionType, functools.partial, types.MethodType)) and (
            "<" in getattr(obj, "__qualname__", "<") or str(getattr(obj, "__module__", "")).startswith(
                "minitransformer.grading"))
        own = callable(obj) and type(obj).__module__.startswith("minitransformer.grading") \
            and not isinstance(obj, nn.Module)
        if local or own:
            key = len(self.link.callbacks) + 1
            self.link.callbacks[key] = obj
            return ("cb", key)
        return None


def _error(answer: dict[str, Any]) -> BaseException:
    kind, ename, evalue = answer.get("kind"), str(answer.get("ename", "Exception")), str(answer.get("evalue", ""))
    if kind == "reference":
        label = evalue or "the package's version of this piece"
        _common._USED.append(label)
        return _common._ReferenceUsed(label)
    if kind == "interrupt":
        return CheckTimeout("interrupted")
    if kind == "not_implemented":
        return NotImplementedError(evalue)
    if not ename.isidentifier():
        ename = "Exception"
    # A built-in error keeps its class, so a check can expect one ("raises a ValueError"); the sandbox only
    # chooses which error its own code raised, which can change that task's outcome and nothing else.
    builtin = getattr(builtins, ename, None)
    if (isinstance(builtin, type) and issubclass(builtin, Exception)
            and not issubclass(builtin, (StopIteration, StopAsyncIteration))):
        try:
            return builtin(evalue)
        except TypeError:  # e.g. UnicodeDecodeError wants five arguments
            pass
    return type(ename, (Exception,), {"__module__": "builtins"})(evalue)


def _call(link: Link, handle: int, path: str, args: tuple, kwargs: dict, state: Any) -> Any:
    buffer = io.BytesIO()
    _Pickler(buffer, link).dump((handle, path, args, kwargs, state))
    answer, data = link.request({"op": "call", "avoid": sorted(a for a in link.forbidden if not _is_function(a))},
                                buffer.getvalue())
    if answer.get("op") == "error":
        raise _error(answer)
    mine = _tensors(args, [])
    after = data.get("after", []) if isinstance(data, dict) else []
    if len(after) == len(mine):  # what the learner's code changed in place
        with torch.no_grad():
            for a, b in zip(mine, after):
                if isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b):
                    a.copy_(b)
    return decode(link, data.get("value") if isinstance(data, dict) else None)


def _is_function(target: str) -> bool:
    """True for a function of the package (taken out of the sandbox's copy); False for classes and PyTorch's pieces."""
    import importlib

    module_name, _, attr = target.partition(":")
    if not module_name.startswith("minitransformer."):
        return False
    try:
        return isinstance(getattr(importlib.import_module(module_name), attr), types.FunctionType)
    except (ImportError, AttributeError):
        return False


class RemoteCallable:
    """The learner's function or class, living in the sandbox."""

    def __init__(self, link: Link, handle: int, name: str, kind: str) -> None:
        self.link, self.handle, self.__name__, self.kind = link, handle, name, kind
        self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self.link, self.handle, "", args, kwargs, None)

    def __repr__(self) -> str:
        return f"<the learner's {self.kind} {self.__name__}>"


class RemoteModule(nn.Module):
    """A module built by the learner's class: its structure and tensors here, its ``forward`` in the sandbox."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        root = self._remote_root
        state = {"params": {n: p.detach() for n, p in root.named_parameters(remove_duplicate=False)},
                 "buffers": {n: b for n, b in root.named_buffers(remove_duplicate=False)},
                 "training": {n: m.training for n, m in root.named_modules(remove_duplicate=False)}}
        return _call(self._remote_link, self._remote_handle, self._remote_path, args, kwargs, state)


class Opaque:
    """A value of a type that is not sent as data (a generator, an object of the learner's class)."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return f"<{self.type_name}: {self.text[:80]}>"


def _module(link: Link, skeleton: dict[str, Any], memo: dict[int, nn.Parameter], root: Any = None) -> RemoteModule:
    name = str(skeleton.get("name", "Module"))
    base = getattr(nn, str(skeleton.get("base", "")), None) if str(skeleton.get("base", "")).isidentifier() else None
    bases = (RemoteModule, base) if isinstance(base, type) and issubclass(base, nn.Module) and base is not nn.Module \
        else (RemoteModule,)
    cls = type(name if name.isidentifier() else "Module", bases, {"__module__": "__main__"})
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    object.__setattr__(module, "_remote_link", link)
    object.__setattr__(module, "_remote_handle", int(skeleton.get("handle", 0)))
    object.__setattr__(module, "_remote_path", str(skeleton.get("path", "")))
    object.__setattr__(module, "_remote_root", root if root is not None else module)
    module.training = bool(skeleton.get("training", True))
    for key, value in (skeleton.get("attrs") or {}).items():
        if isinstance(key, str) and key.isidentifier() and not hasattr(nn.Module, key):
            object.__setattr__(module, key, value)
    for key, value in (skeleton.get("params") or {}).items():
        if isinstance(value, torch.Tensor):
            if id(value) not in memo:
                memo[id(value)] = nn.Parameter(value, requires_grad=value.is_floating_point() or value.is_complex())
            module._parameters[key] = memo[id(value)]
        else:
            module._parameters[key] = None
    for key, value in (skeleton.get("buffers") or {}).items():
        module._buffers[key] = value if isinstance(value, torch.Tensor) else None
    for key, child in (skeleton.get("children") or {}).items():
        module._modules[key] = _module(link, child, memo, module._remote_root) if isinstance(child, dict) else None
    return module


def decode(link: Link, value: Any) -> Any:
    """Plain data from the sandbox, with proxies for the learner's callables and modules."""
    if isinstance(value, dict):
        if value.get("__module__") is True:
            return _module(link, value, {})
        if "__callable__" in value and "handle" in value:
            return RemoteCallable(link, int(value["handle"]), str(value.get("name", "?")), str(value["__callable__"]))
        if "__opaque__" in value:
            return Opaque(str(value["__opaque__"]), str(value.get("repr", "")))
        return {k: decode(link, v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(link, v) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(link, v) for v in value)
    return value


def _statements(source: str) -> list[str]:
    tree = ast.parse(source)
    return [ast.get_source_segment(source, node) or "" for node in tree.body]


def run_check_cell(link: Link, source: str, grade_id: str, checks: dict[str, Any],
                   deadline: float) -> list[dict[str, Any]]:
    """Run one reference check cell here, with the learner's names looked up in the sandbox; one part per statement."""
    import builtins

    import minitransformer

    link.deadline = deadline
    link.forbidden = set(avoided(source, checks))
    parts: list[dict[str, Any]] = []
    for statement in _statements(source):
        used = sorted({n.id for n in ast.walk(ast.parse(statement)) if isinstance(n, ast.Name)})
        trusted = {"minitransformer": minitransformer, "torch": torch, **{n: checks[n] for n in used if n in checks}}
        wanted = [n for n in used if n not in trusted and not hasattr(builtins, n)]
        try:
            answer, values = link.request({"op": "lookup", "names": wanted}) if wanted else ({}, {})
            space: dict[str, Any] = {"__builtins__": builtins}
            space.update({k: decode(link, v) for k, v in (values or {}).items() if k in wanted})
            space.update(trusted)
            buffer = io.StringIO()
            import contextlib

            with CHECK_LOCK:
                previous = _common._REMOTE
                _common._REMOTE = True
                try:
                    with contextlib.redirect_stdout(buffer):
                        exec(compile(statement, f"<check {grade_id}>", "exec"), space)
                finally:
                    _common._REMOTE = previous
        except CheckTimeout:
            parts.append({"passed": False, "message": "timed out: the check was interrupted", "timeout": True})
        except KernelGone as err:
            parts.append({"passed": False, "message": f"not run: {err}", "gone": True})
            break
        except BaseException as err:  # noqa: BLE001 - a failed check, the learner's error, a missing name
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            parts.append({"passed": False, "message": f"{type(err).__name__}: {err}"})
        else:
            line = next((ln for ln in buffer.getvalue().splitlines() if ln.startswith("✓")), "passed")
            parts.append({"passed": True, "message": line})
    return parts


def check_functions() -> dict[str, Any]:
    """The genuine check functions, from the grader's own package."""
    from .. import grading

    return {name: getattr(grading, name) for name in dir(grading) if name.startswith("check_")}


def avoided(source: str, checks: dict[str, Any]) -> list[str]:
    """The pieces (``module:name``) the checks called in ``source`` ask the learner not to use."""
    names = {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
    out: list[str] = []
    for name in sorted(names & set(checks)):
        out += [a for a in getattr(checks[name], "__avoid__", ()) if a not in out]
    return out


# ------------------------------------------------------------------------------------------------
# One submission, from start to end
# ------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RunResult:
    """What happened in one run: each cell's outcome, and how the run ended."""

    events: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    timed_out_cells: list[int] = dataclasses.field(default_factory=list)
    notebook_timeout: bool = False
    ended: bool = False
    crash: dict[str, Any] | None = None
    gone: str | None = None
    exit_code: int | None = None
    output: str = ""
    output_cut: bool = False


def run_submission(cells: list[dict[str, Any]], package: Any, *, notebook: bytes | None, sandbox: bool,
                   cell_timeout: float, notebook_timeout: float, memory_mb: int,
                   checks: dict[str, Any]) -> RunResult:
    """Run the learner's cells in a sandbox and the check cells here; see the module docstring."""
    from ._sandbox import Sandboxed

    box = Sandboxed(package, notebook, sandbox=sandbox, memory_mb=memory_mb)
    link = Link(box)
    result = RunResult()
    start = time.monotonic()
    end = start + notebook_timeout
    try:
        plan = {"threads": 1,
                "cells": [{"kind": c["kind"], "source": c["source"] if c["kind"] == "code" else ""} for c in cells]}
        write_frame(box.req_w, {"op": "plan"}, pickle.dumps(plan))
        current: int | None = None
        cell_start = interrupted_at = 0.0
        while True:
            now = time.monotonic()
            deadlines = [end, now + 1.0]
            if current is not None:
                deadlines.append(cell_start + cell_timeout if not interrupted_at else interrupted_at + _GRACE)
            try:
                header, _ = read_frame(box.out_r, min(deadlines))
            except TimeoutError:
                now = time.monotonic()
                if now >= end:
                    result.notebook_timeout = True
                    break
                if current is not None and not interrupted_at and now >= cell_start + cell_timeout:
                    result.timed_out_cells.append(current)
                    interrupted_at = now
                    box.interrupt()
                elif interrupted_at and now >= interrupted_at + _GRACE:
                    result.gone = "a cell ignored the interrupt after its time limit"
                    break
                elif not box.alive():
                    break  # the runner ended, but something it started holds the channel open
                continue
            except (Closed, TooLarge, ValueError, OSError):
                break
            event = header.get("event")
            if event == "start":
                current, cell_start, interrupted_at = int(header.get("cell", -1)), time.monotonic(), 0.0
            elif event == "done":
                result.events[int(header.get("cell", -1))] = {"error": header.get("error")}
                current = None
            elif event == "piece":
                link.piece(header, _)
            elif event == "check":
                index = int(header.get("cell", -1))
                if not 0 <= index < len(cells) or cells[index]["kind"] != "check" or index in result.events:
                    result.gone = "the submission's process sent a message out of order"
                    break
                cell = cells[index]
                parts = run_check_cell(link, cell["source"], cell["grade_id"], checks,
                                       min(time.monotonic() + cell_timeout, end))
                result.events[index] = {"parts": parts}
                if link.dead:
                    result.gone = link.dead
                    break
                try:
                    write_frame(box.req_w, {"op": "resume"})
                except OSError:
                    break
            elif event == "end":
                result.ended = True
                break
            elif event == "crash":
                result.crash = header.get("error") if isinstance(header.get("error"), dict) else {"ename": "?"}
                break
    finally:
        result.exit_code = box.close()
        result.output, result.output_cut = box.output.text(), box.output.cut
    return result
