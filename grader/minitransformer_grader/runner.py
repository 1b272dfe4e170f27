"""The process that runs one submission for the grader: ``python -m minitransformer_grader.runner IN OUT INTERRUPT``.

It runs inside the sandbox (:mod:`.sandbox`) and holds no check, no reference and no answer: the
package it imports is the sandbox's copy, whose ``minitransformer.checks`` only has do-nothing
stand-ins for the check functions, and whose pieces that the exercise asks the learner to write
are replaced by stubs that raise (see :mod:`.sandbox`).

It reads a plan from the file descriptor ``IN`` (the learner's code cells and the places of the
check cells), runs the code cells in an IPython shell, and reports on ``OUT`` (frames of
:mod:`.protocol`). At each check cell it stops and serves the grader, which runs the genuine
check in its own process: the grader asks for the values of the names the check cell uses, calls
the learner's functions and classes on inputs it drew, and receives what they returned as plain
data. Nothing this process reports is a grade; at worst it changes the learner's own outputs.

A byte on ``INTERRUPT`` interrupts the running cell or call (the grader's time limit). In the
sandbox the runner's parent is the PID namespace's init, which the submission cannot signal;
outside it the process forks first, so that ``os.kill(os.getppid(), 9)`` ends a waiting parent,
not the grader.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import traceback
import types
from typing import Any

from .protocol import Closed, load_plain, read_frame, save_plain, write_frame  # noqa: F401 - load_plain for tests

_MAX_ITEMS = 100_000  # values in one reply
_MAX_DEPTH = 20


class _Handles:
    """The learner's objects the grader may call, by number."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self.ids: dict[int, int] = {}

    def add(self, obj: Any) -> int:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = obj
        return self.ids[key]


class _Link:
    """The two channels to the grader and the handles of the learner's objects."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in, self.fd_out = fd_in, fd_out
        self.handles = _Handles()

    def emit(self, header: dict[str, Any], payload: bytes = b"") -> None:
        write_frame(self.fd_out, header, payload)


_LINK: _Link | None = None
_BUSY = [False]  # True while the learner's code runs: an interrupt that comes at any other time is dropped


class _Callback:
    """A function of the grader's (a toy model's next-token scores) that the learner's code calls."""

    def __init__(self, key: int) -> None:
        self.key = key

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        assert _LINK is not None
        counter = [0]
        _LINK.emit({"event": "callback", "id": self.key},
                   save_plain({"args": _encode(list(args), counter), "kwargs": _encode(kwargs, counter)}))
        header, payload = read_frame(_LINK.fd_in)
        if header.get("op") != "callback_result":
            raise RuntimeError(header.get("error", "the grader's function failed"))
        return pickle.loads(payload)


def ask_served(target: str, args: tuple, kwargs: dict) -> Any:
    """A piece taken out of the sandbox that the running check lets the grader compute (its fixed list).

    The grader answers only while one of its checks calls the learner's code, only for the pieces that
    check names, and only for arguments it accepts; anything else comes back refused.
    """
    assert _LINK is not None
    counter = [0]
    _LINK.emit({"event": "serve", "target": target},
               save_plain({"args": _encode(list(args), counter), "kwargs": _encode(kwargs, counter)}))
    header, payload = read_frame(_LINK.fd_in)
    if header.get("op") != "served":
        raise RuntimeError(str(header.get("error", f"the grader refused to compute {target}"))[:500])
    return pickle.loads(payload)


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        assert _LINK is not None
        kind = pid[0]
        if kind == "cb":
            return _Callback(pid[1])
        obj = _LINK.handles.objects[pid[1]]
        return obj.get_submodule(pid[2]) if pid[2] else obj


def _plain_tensor(t: Any) -> Any:
    import torch

    t = t.detach()
    if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
        t = t.as_subclass(torch.Tensor)
    return torch.Tensor(t.clone()) if type(t) is torch.nn.Parameter else t.clone()


def _skeleton(module: Any, handle: int, path: str, memo: dict[int, Any], counter: list[int]) -> dict[str, Any]:
    """What the grader needs of a module: its parameters, buffers, sub-modules and simple attributes."""
    import torch

    counter[0] += 1
    if counter[0] > _MAX_ITEMS:
        raise ValueError("too many values to send")

    def tensor(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return None
        if id(t) not in memo:
            memo[id(t)] = _plain_tensor(t)
        return memo[id(t)]

    attrs = {k: v for k, v in vars(module).items() if not k.startswith("_")
             and isinstance(v, (bool, int, float, str, type(None)))}
    base = next((c.__name__ for c in type(module).__mro__ if c.__module__.startswith("torch.nn.modules")
                 and c.__name__ != "Module"), "")
    return {"__module__": True, "handle": handle, "path": path, "name": type(module).__name__, "base": base,
            "training": bool(module.training), "attrs": attrs,
            "params": {n: tensor(p) for n, p in module._parameters.items()},
            "buffers": {n: tensor(b) for n, b in module._buffers.items()},
            "children": {n: _skeleton(c, handle, f"{path}.{n}" if path else n, memo, counter) if c is not None else None
                         for n, c in module._modules.items()}}


def _encode(x: Any, counter: list[int], depth: int = 0, memo: dict[int, Any] | None = None) -> Any:
    """The learner's value as plain data: tensors, numbers, strings, containers, and markers for the rest."""
    import torch

    memo = {} if memo is None else memo
    counter[0] += 1
    if counter[0] > _MAX_ITEMS or depth > _MAX_DEPTH:
        raise ValueError("the value is too large or too deeply nested to send to the grader")
    if isinstance(x, torch.Tensor):
        if id(x) not in memo:
            memo[id(x)] = _plain_tensor(x)
        return memo[id(x)]
    if x is None or type(x) in (bool, int, float, str, complex):
        return x
    if isinstance(x, (bool, int, float, str)):  # subclasses (numpy's float64 is a float)
        return type(x).__mro__[[c.__module__ for c in type(x).__mro__].index("builtins")](x)
    if type(x).__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        return _encode(x.item(), counter, depth + 1, memo)
    if type(x) is torch.Size:
        return tuple(int(v) for v in x)
    if isinstance(x, (list, tuple)):  # a namedtuple arrives as a tuple, a list subclass as a list
        return (list if isinstance(x, list) else tuple)(_encode(v, counter, depth + 1, memo) for v in x)
    if isinstance(x, (set, frozenset)):
        return {"__set__": [_encode(v, counter, depth + 1, memo) for v in x], "frozen": isinstance(x, frozenset)}
    if isinstance(x, dict) and not isinstance(x, torch.nn.Module):  # an OrderedDict (a state_dict) as a dict
        return {k: _encode(v, counter, depth + 1, memo) for k, v in x.items() if isinstance(k, (str, int))}
    assert _LINK is not None
    if isinstance(x, torch.nn.Module):
        return _skeleton(x, _LINK.handles.add(x), "", {}, counter)
    if callable(x):
        kind = "class" if isinstance(x, type) else "function"
        return {"__callable__": kind, "handle": _LINK.handles.add(x), "name": str(getattr(x, "__name__", type(x).__name__))}
    return {"__opaque__": type(x).__name__, "repr": _text(x)[:200]}


def _text(x: Any) -> str:
    try:
        return str(x)[:2000]
    except BaseException:  # noqa: BLE001 - the learner's __str__ may raise anything
        return f"<{type(x).__name__}>"


def tensors_of(x: Any, out: list[Any], depth: int = 0) -> list[Any]:
    """The tensors inside ``x`` (lists, tuples, dicts), in order: what the grader's check may see changed in place."""
    import torch

    if depth > _MAX_DEPTH or len(out) > _MAX_ITEMS:
        return out
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            tensors_of(v, out, depth + 1)
    elif isinstance(x, dict):
        for v in x.values():
            tensors_of(v, out, depth + 1)
    return out


def _apply_state(module: Any, state: dict[str, Any]) -> None:
    """The parameters, buffers and train/eval flags the grader's check gave the learner's module."""
    import torch

    with torch.no_grad():
        for kind, values in (("parameter", state.get("params", {})), ("buffer", state.get("buffers", {}))):
            for name, value in values.items():
                try:
                    target = module.get_parameter(name) if kind == "parameter" else module.get_buffer(name)
                except (AttributeError, TypeError):
                    continue
                if isinstance(target, torch.Tensor) and target.shape == value.shape:
                    target.copy_(value)
        for path, flag in state.get("training", {}).items():
            try:
                (module.get_submodule(path) if path else module).training = bool(flag)
            except AttributeError:
                continue


def _arm(targets: list[str], spaces: list[dict[str, Any]], called: Any = None) -> list[Any]:
    """Disable the pieces the running check asks for that are not taken out of the package (PyTorch's, and classes).

    They are replaced where PyTorch defines them, wherever the learner's namespace holds them, and in
    the default arguments, closures and class attributes of the learner's code being called, for the
    duration of one call; returns what undoes it. This is a second line only: code in the sandbox can
    undo it, and the grader's own scan of the submitted source (:mod:`.remote`) does not depend on it.
    """
    import importlib

    from minitransformer import sandbox_stubs

    undo: list[Any] = []
    fakes: dict[int, Any] = {}
    for target in targets:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        real = getattr(module, attr, None)
        if real is None:
            continue
        owner = "minitransformer" if module_name.startswith("minitransformer") else "torch"
        if isinstance(real, type):  # a class: its forward raises while the call runs
            had = "forward" in vars(real)
            previous = vars(real).get("forward")
            fake_forward = sandbox_stubs.stub(f"{owner}'s {attr}")
            if previous is not None:
                fakes[id(previous)] = fake_forward
            fakes[id(real)] = real  # the class itself stays (its forward raises); listed so aliases are seen
            real.forward = fake_forward
            undo.append((real, "forward", previous) if had else (real, "forward", None))
            continue
        fake = sandbox_stubs.stub(f"{owner}'s {attr}")
        fakes[id(real)] = fake
        for space in [vars(module), *spaces]:
            for name, value in list(space.items()):
                if value is real:
                    space[name] = fake
                    undo.append((space, name, value))
    if called is not None:
        undo += _arm_holders(called, fakes)
    return undo


def _holders(called: Any) -> list[Any]:
    """The learner's functions and classes reachable from ``called``: its class and their bases, methods,
    default arguments and closures (not the package's or PyTorch's own)."""
    import torch

    seen: dict[int, Any] = {}
    todo = [called, *(type(m) for m in called.modules())] if isinstance(called, torch.nn.Module) else [called]
    while todo and len(seen) < 2000:
        obj = todo.pop()
        if id(obj) in seen or str(getattr(obj, "__module__", "") or "").startswith(("torch", "minitransformer")):
            continue
        if isinstance(obj, type):
            seen[id(obj)] = obj
            todo += [c for c in obj.__mro__[1:]] + list(vars(obj).values())
        elif isinstance(obj, (types.FunctionType, types.MethodType, staticmethod, classmethod, property)):
            inner = getattr(obj, "__func__", None) or getattr(obj, "fget", None) or obj
            if isinstance(inner, types.FunctionType):
                seen[id(obj)] = inner
                todo += [*(inner.__defaults__ or ()), *(inner.__kwdefaults__ or {}).values()]
                todo += [c.cell_contents for c in inner.__closure__ or () if _filled(c)]
    return list(seen.values())


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _arm_holders(called: Any, fakes: dict[int, Any]) -> list[Any]:
    """Swap forbidden pieces held in default arguments, closures and class attributes of the learner's code."""
    undo: list[Any] = []
    for holder in _holders(called):
        if isinstance(holder, type):
            for name, value in list(vars(holder).items()):
                if id(value) in fakes and fakes[id(value)] is not value:
                    setattr(holder, name, fakes[id(value)])
                    undo.append((holder, name, value))
            continue
        if holder.__defaults__ and any(id(v) in fakes for v in holder.__defaults__):
            undo.append((holder, "__defaults__", holder.__defaults__))
            holder.__defaults__ = tuple(fakes.get(id(v), v) for v in holder.__defaults__)
        if holder.__kwdefaults__ and any(id(v) in fakes for v in holder.__kwdefaults__.values()):
            undo.append((holder, "__kwdefaults__", dict(holder.__kwdefaults__)))
            holder.__kwdefaults__ = {k: fakes.get(id(v), v) for k, v in holder.__kwdefaults__.items()}
        for cell in holder.__closure__ or ():
            if _filled(cell) and id(cell.cell_contents) in fakes:
                undo.append((cell, "cell_contents", cell.cell_contents))
                cell.cell_contents = fakes[id(cell.cell_contents)]
    return undo


_THREADS: set[int] = set()  # the runner's own threads (and IPython's), before the learner's code runs


def _recorder() -> Any:
    """A recorder of the operations the learner's code runs (minitransformer.checks.operations, copied beside
    the runner in the sandbox, whose minitransformer.checks holds only stand-ins)."""
    try:
        from .operations import Recorder, service  # type: ignore[import-not-found]
    except ImportError:
        from minitransformer.checks.operations import Recorder, service

    for fn in (ask_served, _Callback.__call__):  # what the runner sends the grader is not the learner's work
        service(fn)
    return Recorder(threads=_THREADS)


def _serve(link: _Link, cell: int) -> None:
    """Answer the grader's requests for one check cell, until it says to go on."""
    from minitransformer import sandbox_stubs

    while True:
        header, payload = read_frame(link.fd_in)
        op = header.get("op")
        if op == "resume":
            return
        if op == "lookup":
            values, counter = {}, [0]
            from IPython.core.interactiveshell import InteractiveShell

            space = InteractiveShell.instance().user_ns
            for name in header.get("names", []):
                if name in space:
                    try:
                        values[name] = _encode(space[name], counter)
                    except Exception as err:  # noqa: BLE001
                        values[name] = {"__opaque__": type(space[name]).__name__, "repr": f"not sendable: {_text(err)}"}
            link.emit({"op": "result"}, save_plain(values))
            continue
        if op != "call":
            link.emit({"op": "error", "kind": "protocol", "ename": "RuntimeError", "evalue": f"unknown request {op!r}"})
            continue
        try:
            handle, path, args, kwargs, state = _Unpickler(__import__("io").BytesIO(payload)).load()
            target = link.handles.objects[handle]
            if state is not None:
                _apply_state(target, state)
            if path:
                target = target.get_submodule(path)
            del sandbox_stubs.USED[:]
            from IPython.core.interactiveshell import InteractiveShell

            undo = _arm([str(a) for a in header.get("avoid", [])], [InteractiveShell.instance().user_ns], target)
            sandbox_stubs.SERVED.update(str(a) for a in header.get("serve", []))
            recorder = _recorder() if header.get("record") else None
            try:
                _BUSY[0] = True
                value = target(*args, **kwargs) if recorder is None else recorder.call(target, *args, **kwargs)
            finally:
                _BUSY[0] = False
                sandbox_stubs.SERVED.clear()
                for space, name, value_ in reversed(undo):
                    if isinstance(space, dict):
                        space[name] = value_
                    elif value_ is None:
                        delattr(space, name)
                    else:
                        setattr(space, name, value_)
                used = sorted(set(sandbox_stubs.USED))
            if used:
                raise sandbox_stubs.ReferenceUsed(used[0])
            counter = [0]

            def encode() -> dict[str, Any]:  # recorded too: a tensor subclass returned might compute while it is read
                return {"value": _encode(value, counter), "after": [_plain_tensor(t) for t in tensors_of(args, [])]}

            body = encode() if recorder is None else recorder.call(encode)
            if recorder is not None:  # what the learner's code ran: the grader compares it with the task's list
                body["ops"] = dict(recorder.ops)
            reply = save_plain(body)
        except sandbox_stubs.ReferenceUsed as err:
            link.emit({"op": "error", "kind": "reference", "ename": "ReferenceUsed", "evalue": _text(err)})
        except KeyboardInterrupt:
            link.emit({"op": "error", "kind": "interrupt", "ename": "KeyboardInterrupt", "evalue": "interrupted"})
        except NotImplementedError as err:
            link.emit({"op": "error", "kind": "not_implemented", "ename": "NotImplementedError", "evalue": _text(err)})
        except BaseException as err:  # noqa: BLE001 - the learner's error goes to the grader's check
            if isinstance(err, (SystemExit, GeneratorExit)) and not isinstance(err, Exception):
                link.emit({"op": "error", "kind": "other", "ename": type(err).__name__, "evalue": _text(err)})
                continue
            name = type(err).__name__ if type(err).__name__.isidentifier() else "Exception"
            link.emit({"op": "error", "kind": "other", "ename": name[:80], "evalue": _text(err)})
        else:
            link.emit({"op": "result"}, reply)
        finally:
            sandbox_stubs.USED.clear()


def _run(link: _Link) -> None:
    header, payload = read_frame(link.fd_in)
    plan = pickle.loads(payload)
    import torch

    torch.set_num_threads(int(plan.get("threads", 1)))
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance(colors="NoColor")
    shell.user_ns["__name__"] = "__main__"
    _THREADS.update(sys._current_frames())
    for index, cell in enumerate(plan["cells"]):
        if cell["kind"] == "check":
            link.emit({"event": "check", "cell": index})
            _serve(link, index)
            continue
        link.emit({"event": "start", "cell": index})
        _BUSY[0] = True
        try:
            result = shell.run_cell(cell["source"], store_history=False, silent=False)
        finally:
            _BUSY[0] = False
        err = result.error_before_exec or result.error_in_exec
        info = None
        if err is not None:
            info = {"ename": type(err).__name__, "evalue": _text(err)}
            if isinstance(err, SyntaxError):
                info.update(lineno=err.lineno, evalue=str(err.msg))
        link.emit({"event": "done", "cell": index, "error": info})
    link.emit({"event": "end"})


def _watch_interrupts(fd: int) -> None:
    """Each byte on ``fd`` interrupts the main thread (the grader's time limit for a cell or a call), if it runs
    the learner's code: a byte that comes after the code ended would kill the idle runner."""
    while True:
        try:
            data = os.read(fd, 1)
        except OSError:
            return
        if not data:
            return
        if _BUSY[0]:  # a real signal: it also wakes a blocking call (time.sleep, a read), which
            # _thread.interrupt_main only flags, to be raised once that call returns by itself
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def main() -> None:
    global _LINK
    fd_in, fd_out, fd_interrupt = (int(a) for a in sys.argv[1:4])
    # In the sandbox the parent is the PID namespace's init, which signals from inside cannot kill; elsewhere
    # a waiting parent takes the blow of os.kill(os.getppid(), 9). No fork (Windows): the code runs here.
    child = os.fork() if hasattr(os, "fork") and os.getppid() != 1 else 0
    if child:  # the waiting parent: it only reports how the child ended
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    # A process started in the background by a shell without job control (CI's, or `cmd &`) inherits SIGINT
    # ignored, and Python then leaves it ignored: the watcher's interrupt would do nothing
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _LINK = link = _Link(fd_in, fd_out)
    sys.modules.setdefault("minitransformer_grader.runner", sys.modules[__name__])  # one _LINK for the stand-ins
    threading.Thread(target=_watch_interrupts, args=(fd_interrupt,), daemon=True).start()
    try:
        _run(link)
    except Closed:
        pass
    except BaseException as err:  # noqa: BLE001 - report why the runner stopped, then stop
        try:
            link.emit({"event": "crash", "error": {"ename": type(err).__name__, "evalue": _text(err),
                                                    "where": traceback.format_exc()[-1000:]}})
        except OSError:
            pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
