"""The grader's side of a submission's run: the checks run here, the learner's code runs in the sandbox.

Each check function (``check_*`` of :mod:`minitransformer.checks`) has two halves that it already
kept apart: it draws inputs from its own seeded generator, hands them to the learner's code through
``call_learner`` (or builds the learner's module through ``build_learner``), and compares what came back with the
package's reference, with the tolerance and the known-mistake diagnosis of ``compare`` (all three in
``minitransformer.checks.compare``).
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
import functools
import io
import pickle
import threading
import time
import types
from typing import Any, Callable

import torch
from torch import nn

import minitransformer.checks
from minitransformer.checks import compare

from .runner import tensors_of  # one definition: the tensors a call may change in place
from .protocol import WRITE_WAIT, Closed, TooLarge, load_plain, read_frame, write_frame
from .scan import parse

__all__ = ["CHECK_LOCK", "CheckTimeout", "KernelGone", "Link", "check_functions", "run_check_cell"]

CHECK_LOCK = threading.Lock()  # the checks use module-level state (sentinel tables, torch's RNG): one at a time
GRACE = 5.0


def check_functions() -> dict[str, Any]:
    """The genuine check functions, from the learner's package: ``{"check_...": function}``."""
    return {name: getattr(minitransformer.checks, name) for name in minitransformer.checks.__all__}


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
        self.serving: set[str] = set()  # the pieces (keys of SERVED) the running check lets the grader compute
        self.waited = 0.0  # seconds the last check cell waited for CHECK_LOCK (not counted against the submission)

    def _read(self, deadline: float | None) -> tuple[dict[str, Any], bytes]:
        try:  # a frame begun before the deadline must end within the grace period after it
            return read_frame(self.box.out_r, deadline, limit=None if deadline is None else deadline + GRACE)
        except TimeoutError:  # the check's deadline, not a dead process (TimeoutError is an OSError)
            raise
        except (Closed, TooLarge, ValueError, OSError) as err:
            self.dead = f"the submission's process stopped answering ({err})"
            raise KernelGone(self.dead) from None

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        """Write to the runner, giving up after WRITE_WAIT seconds (a runner that never reads is dead to us)."""
        if self.dead:
            raise KernelGone(self.dead)
        try:
            write_frame(self.box.req_w, header, payload, deadline=time.monotonic() + WRITE_WAIT)
        except TimeoutError:
            self.dead = f"the submission's process stopped reading what the grader sent ({WRITE_WAIT:g} s)"
            raise KernelGone(self.dead) from None
        except OSError:
            self.dead = "the submission's process died"
            raise KernelGone(self.dead) from None

    def request(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict[str, Any], Any]:
        """Send a request and wait for its answer (serving the sandbox's callbacks meanwhile).

        The check cell's deadline is fixed before the first request: nothing the sandbox sends moves it.
        Past it nothing more is sent (an idle runner is never interrupted); a running call is interrupted
        once, and its answer must come within GRACE seconds of that, whatever else the sandbox sends.
        """
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise CheckTimeout("out of time")
        self.send(header, payload)
        grace_end: float | None = None  # set once, when the interrupt is sent
        while True:
            try:
                answer, data = self._read(grace_end or self.deadline)
            except TimeoutError:
                if grace_end is not None:
                    self.dead = "the learner's code ignored the interrupt after its time limit"
                    raise KernelGone(self.dead) from None
                self.box.interrupt()
                grace_end = time.monotonic() + GRACE
                continue
            if answer.get("event") in ("callback", "serve"):
                if grace_end is not None:  # out of time: nothing more is computed for it
                    self.send({"op": "refused", "error": "the check's time is up"})
                elif answer["event"] == "callback":
                    self._callback(answer, data)
                else:
                    self.serve(answer, data, self.serving)
                continue
            if grace_end is not None or (answer.get("op") == "error" and answer.get("kind") == "interrupt"):
                raise CheckTimeout("interrupted")  # even an answer that came after the limit
            try:
                return answer, load_plain(data) if data else None
            except Exception as err:  # noqa: BLE001 - anything but plain data is refused
                self.dead = f"the submission's process sent data the grader refuses ({type(err).__name__}: {err})"
                raise KernelGone(self.dead) from None

    def serve(self, header: dict[str, Any], data: bytes, allowed: set[str]) -> None:
        """Compute a piece of the fixed table SERVED, if the running check lists it, on arguments it accepts.

        The sandbox only names an entry of the table; the callable and the checks on its arguments are
        the grader's own. Outside a check's call (``allowed`` empty) everything is refused.
        """
        target = str(header.get("target", ""))
        try:
            if target not in allowed or target not in SERVED:
                raise PermissionError(f"the grader computes nothing named {target[:100]!r} for this check")
            function, validate = SERVED[target]
            args, kwargs = validate(load_plain(data, max_elements=1 << 20))
            with torch.no_grad():
                result = function()(*args, **kwargs)
            reply = ({"op": "served"}, pickle.dumps(result))
        except Exception as err:  # noqa: BLE001 - refused: the piece raises this in the sandbox
            reply = ({"op": "refused", "error": f"{type(err).__name__}: {err}"[:500]}, b"")
        self.send(*reply)

    def _callback(self, header: dict[str, Any], data: bytes) -> None:
        try:
            call = load_plain(data, max_elements=1 << 22)
            result = self.callbacks[int(header["id"])](*call["args"], **call["kwargs"])
            reply = ({"op": "callback_result"}, pickle.dumps(result))
        except Exception as err:  # noqa: BLE001 - the learner passed something the check's function refuses
            reply = ({"op": "callback_error", "error": f"{type(err).__name__}: {err}"[:500]}, b"")
        self.send(*reply)


def _target_mask_arguments(call: Any) -> tuple[tuple, dict]:
    """``make_target_mask(tgt, pad_id)``: a 2-D integer tensor of at most 512 positions and 2**20 mask cells, an int."""
    args, kwargs = _plain_call(call, ("tgt", "pad_id"))
    tgt, pad_id = args
    if not isinstance(tgt, torch.Tensor) or tgt.dim() != 2 or tgt.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"make_target_mask takes tgt as a 2-D integer tensor; got {compare.describe(tgt)[:100]}")
    if tgt.size(1) > 512 or tgt.numel() * tgt.size(1) > 1 << 20:
        raise ValueError(f"make_target_mask is computed by the grader for at most 512 positions and 2**20 mask cells; "
                         f"got tgt of shape {tuple(tgt.shape)}")
    if type(pad_id) is not int:
        raise TypeError(f"make_target_mask takes pad_id as an int; got {type(pad_id).__name__}")
    return (tgt.clone(), pad_id), {}


def _plain_call(call: Any, names: tuple[str, ...]) -> tuple[tuple, dict]:
    """The positional values of ``names`` from ``{"args": [...], "kwargs": {...}}``, every one given exactly once."""
    args = call.get("args") if isinstance(call, dict) else None
    kwargs = call.get("kwargs") if isinstance(call, dict) else None
    if not isinstance(args, list) or not isinstance(kwargs, dict) or len(args) > len(names):
        raise TypeError(f"expected the arguments ({', '.join(names)})")
    given = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in given:
            raise TypeError(f"unexpected or repeated argument {str(key)[:40]!r}; expected ({', '.join(names)})")
        given[key] = value
    if set(given) != set(names):
        raise TypeError(f"missing arguments: expected ({', '.join(names)})")
    return tuple(given[n] for n in names), {}


def _make_target_mask() -> Callable[..., Any]:
    from minitransformer.masks import make_target_mask

    return make_target_mask


# The only pieces the grader ever computes for the learner's code: an exact callable and the check of its
# arguments, by the name a check lists in its ``serve`` (see minitransformer.checks.compare.isolated). The
# greedy-decoding task of exercise 06 hands the package's model to the learner's loop; the model builds its
# target mask with make_target_mask, which the same exercise's target-mask task takes out of the sandbox.
SERVED: dict[str, tuple[Callable[[], Callable[..., Any]], Callable[[Any], tuple[tuple, dict]]]] = {
    "minitransformer.masks:make_target_mask": (_make_target_mask, _target_mask_arguments),
}


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
                "minitransformer.checks"))
        own = callable(obj) and type(obj).__module__.startswith("minitransformer.checks") \
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
        compare.USED.append(label)
        return compare.ReferenceUsed(label)
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


def call_remote(link: Link, handle: int, path: str, args: tuple, kwargs: dict, state: Any) -> Any:
    buffer = io.BytesIO()
    _Pickler(buffer, link).dump((handle, path, args, kwargs, state))
    answer, data = link.request({"op": "call", "avoid": sorted(a for a in link.forbidden if not is_package_function(a)),
                                 "serve": sorted(link.serving),
                                 "record": compare.ALLOWED is not None or compare.OBSERVE is not None},
                                buffer.getvalue())
    if answer.get("op") == "error":
        raise _error(answer)
    ops = data.get("ops") if isinstance(data, dict) else None
    if isinstance(ops, dict):  # what the learner's code ran (a report from the sandbox: it can only lower the score)
        compare.judge_operations({str(k)[:200]: str(v)[:200] for k, v in list(ops.items())[:200]})
    mine = tensors_of(args, [])
    after = data.get("after", []) if isinstance(data, dict) else []
    if len(after) == len(mine):  # what the learner's code changed in place
        with torch.no_grad():
            for a, b in zip(mine, after):
                if isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b):
                    a.copy_(b)
    return decode(link, data.get("value") if isinstance(data, dict) else None)


def is_package_function(target: str) -> bool:
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
        return call_remote(self.link, self.handle, "", args, kwargs, None)

    def __repr__(self) -> str:
        return f"<the learner's {self.kind} {self.__name__}>"


class RemoteModule(nn.Module):
    """A module built by the learner's class: its structure and tensors here, its ``forward`` in the sandbox."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        root = self._remote_root
        state = {"params": {n: p.detach() for n, p in root.named_parameters(remove_duplicate=False)},
                 "buffers": {n: b for n, b in root.named_buffers(remove_duplicate=False)},
                 "training": {n: m.training for n, m in root.named_modules(remove_duplicate=False)}}
        return call_remote(self._remote_link, self._remote_handle, self._remote_path, args, kwargs, state)


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
        if isinstance(value.get("__set__"), list):
            try:
                items = [decode(link, v) for v in value["__set__"]]
                return frozenset(items) if value.get("frozen") else set(items)
            except TypeError:  # an unhashable element
                return Opaque("set", "a set of unhashable values")
        return {k: decode(link, v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(link, v) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(link, v) for v in value)
    return value


def _statements(source: str) -> list[str]:
    tree = parse(source)
    return [ast.get_source_segment(source, node) or "" for node in tree.body]


def run_check_cell(link: Link, source: str, grade_id: str, checks: dict[str, Any], timeout: float,
                   end: float) -> list[dict[str, Any]]:
    """Run one reference check cell here, with the learner's names looked up in the sandbox; one part per statement.

    The cell's deadline (``timeout`` seconds, and never past the notebook's ``end``) starts once the
    cell holds CHECK_LOCK: time spent waiting for another submission's check is not charged to this one
    (``link.waited`` says how long, for the notebook's deadline).
    """
    import builtins
    import contextlib

    import minitransformer

    link.forbidden = set(avoided(source, checks))
    link.serving = set(served(source, checks))
    parts: list[dict[str, Any]] = []
    asked = time.monotonic()
    with CHECK_LOCK:
        link.waited = time.monotonic() - asked
        link.deadline = min(time.monotonic() + timeout, end + link.waited)
        for statement in _statements(source):
            used = sorted({n.id for n in ast.walk(parse(statement)) if isinstance(n, ast.Name)})
            trusted = {"minitransformer": minitransformer, "torch": torch, **{n: checks[n] for n in used if n in checks}}
            wanted = [n for n in used if n not in trusted and not hasattr(builtins, n)]
            try:
                answer, values = link.request({"op": "lookup", "names": wanted}) if wanted else ({}, {})
                space: dict[str, Any] = {"__builtins__": builtins}
                space.update({k: decode(link, v) for k, v in (values or {}).items() if k in wanted})
                space.update(trusted)
                buffer = io.StringIO()
                previous, compare.REMOTE = compare.REMOTE, True
                try:
                    with contextlib.redirect_stdout(buffer):
                        exec(compile(statement, f"<check {grade_id}>", "exec"), space)
                finally:
                    compare.REMOTE = previous
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


def served(source: str, checks: dict[str, Any]) -> list[str]:
    """The entries of SERVED that the checks called in ``source`` let the grader compute for the learner's code."""
    names = {n.id for n in ast.walk(parse(source)) if isinstance(n, ast.Name)}
    return sorted({s for name in names & set(checks) for s in getattr(checks[name], "__serve__", ()) if s in SERVED})


def avoided(source: str, checks: dict[str, Any]) -> list[str]:
    """The pieces (``module:name``) the checks called in ``source`` ask the learner not to use."""
    names = {n.id for n in ast.walk(parse(source)) if isinstance(n, ast.Name)}
    out: list[str] = []
    for name in sorted(names & set(checks)):
        out += [a for a in getattr(checks[name], "__avoid__", ()) if a not in out]
    return out
