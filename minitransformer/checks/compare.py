"""Helpers shared by the exercise checks: calling the learner's code, comparing tensors, explaining.

Every check runs under :func:`isolated` (no gradients, the caller's random generators untouched)
and draws its inputs from :func:`make_rng`, a generator seeded with :data:`SEED`. A learner's error
becomes an ``AssertionError`` that names the call which raised it (:func:`call_learner`); a wrong
tensor is compared with the expected one and, where it matches a known mistake, explained
(:func:`compare`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import math
import os
import re
import sys
import types
from typing import Any, Callable, Iterator, Sequence, TypeVar

import torch
from torch import Tensor, nn

from ..config import TransformerConfig
from ..model import Transformer
from . import operations

SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv
_Check = TypeVar("_Check", bound=Callable[..., None])


class ReferenceUsed(BaseException):
    """Raised when the learner's code calls the package's own version of the piece a check is testing.

    A BaseException, so that a learner's ``except Exception`` cannot swallow it on the way out.
    """


# How many calls into the learner's code are running (see call_learner). The package's reference pieces
# named by a check's ``avoid`` are replaced for the check's duration by sentinels that fail when
# called from inside the learner's code, and behave as usual when the check itself calls them.
LEARNER_DEPTH = 0
USED: list[str] = []
# True while the grader runs a check in its own process (minitransformer_grader.remote): the learner's code
# runs in the sandbox, where the pieces to avoid are taken out of the package, so no sentinel is installed here.
REMOTE = False
# While a check that lists the operations its task allows runs: (what the task asks the learner to build, the
# allowed operations). The learner's code is recorded (checks/operations.py) and judged by judge_operations.
ALLOWED: tuple[str, frozenset[str]] | None = None
OUTSIDE: list[str] = []  # what the learner's code called outside the running task's list
OBSERVE: Callable[[dict[str, str]], None] | None = None  # sees every recording (deriving a task's list)
JUDGE = True  # False: operations are not judged (the package's own pieces checked against themselves, in tests)


def judge_operations(ops: dict[str, str]) -> None:
    """Note in OUTSIDE what ``ops`` (key -> what the learner's code called) holds that the running task does not allow.

    The check goes on: when it fails anyway its own message (a known mistake) is the feedback; when it
    passes, :func:`isolated` fails the task and names what was called.
    """
    if OBSERVE is not None:
        OBSERVE(dict(ops))
    if ALLOWED is not None and JUDGE:
        OUTSIDE.extend(b for b in operations.outside(ops, ALLOWED[1]) if b not in OUTSIDE)


def _resolve(target: str) -> tuple[Any, str, Any]:
    """``"package.module:Name"`` -> (module, "Name", the object)."""
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return module, attr, getattr(module, attr)


def _sentinel_call(label: str, real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    if LEARNER_DEPTH > 0:
        USED.append(label)
        raise ReferenceUsed(label)
    return real(*args, **kwargs)


@contextlib.contextmanager
def _sentinels(targets: Sequence[str], learner_globals: Sequence[dict[str, Any]] = ()) -> Iterator[None]:
    """Replace each target (a function, or a class's ``forward``) by a sentinel while the block runs.

    Functions written in Python have their code swapped, so that every alias of them fails too
    (``f = getattr(importlib.import_module("minitransformer"), "scaled_" + "dot_product_attention")``);
    other callables are replaced where they are defined and wherever the learner's globals hold them.
    """
    undo: list[Callable[[], None]] = []
    try:
        for target in targets:
            try:
                module, attr, obj = _resolve(target)
            except (ImportError, AttributeError):
                continue
            label = f"{module.__name__.split('.')[0]}'s {attr}"
            if isinstance(obj, type):
                had = "forward" in vars(obj)
                real_forward = getattr(obj, "forward")

                def forward(self: Any, *args: Any, _real: Any = real_forward, _label: str = label, **kwargs: Any) -> Any:
                    return _sentinel_call(_label, lambda *a, **k: _real(self, *a, **k), *args, **kwargs)

                obj.forward = forward
                undo.append(lambda obj=obj, had=had, real=real_forward: setattr(obj, "forward", real) if had
                            else delattr(obj, "forward"))
                continue
            inner = inspect.unwrap(obj)
            code = getattr(inner, "__code__", None)
            if isinstance(inner, types.FunctionType) and code is not None and not code.co_freevars:
                real = types.FunctionType(code, inner.__globals__, inner.__name__, inner.__defaults__, inner.__closure__)
                real.__kwdefaults__ = inner.__kwdefaults__
                key = f"{inner.__module__}.{inner.__qualname__}"
                table = inner.__globals__.setdefault("__minitransformer_sentinels__", {})
                table[key] = functools.partial(_sentinel_call, label, real)
                space: dict[str, Any] = {}
                exec(f"def trampoline(*args, **kwargs):\n    return __minitransformer_sentinels__[{key!r}](*args, **kwargs)\n",
                     {}, space)
                inner.__code__ = space["trampoline"].__code__

                def restore(inner: Any = inner, code: Any = code, table: dict = table, key: str = key) -> None:
                    inner.__code__ = code
                    table.pop(key, None)
                undo.append(restore)
            else:  # a builtin such as F.scaled_dot_product_attention: replace the names that hold it
                fake = functools.partial(_sentinel_call, label, obj)
                for space_ in [vars(module), *learner_globals]:
                    for name, value in list(space_.items()):
                        if value is obj:
                            space_[name] = fake
                            undo.append(lambda s=space_, n=name, v=value: s.__setitem__(n, v))
        yield
    finally:
        for step in reversed(undo):
            step()


def _learner_globals(args: Sequence[Any]) -> list[dict[str, Any]]:
    """The global namespaces of the learner's functions and classes (a notebook's, usually)."""
    spaces: list[dict[str, Any]] = []
    for arg in args:
        space = getattr(arg, "__globals__", None)
        if space is None and isinstance(arg, type):
            module = sys.modules.get(arg.__module__)
            space = vars(module) if module is not None else None
        if isinstance(space, dict) and not any(space is s for s in spaces) and \
                not str(space.get("__name__", "")).startswith(("minitransformer", "torch")):
            spaces.append(space)
    return spaces


def isolated(check: _Check | None = None, *, avoid: Sequence[str] = (), serve: Sequence[str] = (),
             builds: str | None = None, allow: Sequence[str] = ()) -> Any:
    """Run a check without gradients and without touching the caller's random generators.

    ``avoid`` names the package's (or PyTorch's) versions of the piece the task asks for, as
    ``"module:name"``. While the check runs they fail when the learner's code calls them, however
    they were imported, and the check then fails with a message that names its task. Use as
    ``@isolated`` or ``@isolated(avoid=[...])``.

    ``serve`` names pieces that another task of the same exercise takes out of the grading sandbox
    but that the code this check hands to the learner needs (the package's model builds its target
    mask): while this check calls the learner's code, and only then, the grader computes them, from
    its fixed table (``minitransformer_grader.remote.SERVED``: the exact callables and the checks of
    their arguments).

    ``builds`` says what the task asks the learner to build and from what ("the softmax from exp and
    sum"), and ``allow`` lists the operations it allows beyond :data:`operations.ALWAYS` (PyTorch's by
    base name, ``"softmax"``; the package's or another library's functions as ``"minitransformer:Name.method"``).
    While the check calls the learner's code, every operation that code runs is recorded; one outside the
    list fails the task with a message that names it.
    """
    allowed = (builds, frozenset(operations.op_key(a) if ":" not in a else a for a in allow)) if builds else None

    def decorate(check: _Check) -> _Check:
        @functools.wraps(check)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            __tracebackhide__ = True  # IPython leaves the checker's own frames out of tracebacks
            global ALLOWED
            del USED[:]
            previous, saved, ALLOWED = ALLOWED, OUTSIDE[:], allowed
            del OUTSIDE[:]
            try:
                with torch.random.fork_rng(devices=[]), torch.no_grad(), \
                        _sentinels(() if REMOTE else avoid, () if REMOTE else _learner_globals(args)):
                    check(*args, **kwargs)
            except ReferenceUsed:
                pass
            except AssertionError as err:  # the check's verdict: a notebook shows its message, not the check's code
                _show_without_the_checks(err)
                raise
            finally:
                ALLOWED = previous
                outside, OUTSIDE[:] = OUTSIDE[:], saved
                used, USED[:] = sorted(set(USED)), []
            if outside and not used:
                task = kwargs.get("task")
                raise _show_without_the_checks(AssertionError(
                    f"{'Task ' + str(task) if task is not None else 'This task'}: this task asks you to build "
                    f"{builds}; your code called {', '.join(sorted(outside))} (graded: 0 points for this task)."))
            if used:
                task = kwargs.get("task")
                raise _show_without_the_checks(AssertionError(
                    f"{'Task ' + str(task) if task is not None else 'This task'}: your code calls {', '.join(used)}, "
                    "the ready-made version of the piece this task asks you to write. Build it from PyTorch "
                    "operations instead (graded: 0 points for this task)."
                ))

        wrapper.__avoid__ = tuple(avoid)  # type: ignore[attr-defined]  # the grader takes them out of the sandbox
        wrapper.__serve__ = tuple(serve)  # type: ignore[attr-defined]
        wrapper.__allowed__ = allowed  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate(check) if check is not None else decorate


_CHECKS_FOLDER = os.path.dirname(os.path.abspath(__file__))


def _in_the_checks(frame: types.FrameType) -> bool:
    """Whether ``frame`` runs code of the checks' folder (a check or one of its helpers)."""
    filename = os.path.abspath(frame.f_code.co_filename)
    return os.path.dirname(filename) == _CHECKS_FOLDER


def _without_the_checks(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A copy of the traceback ``tb`` without the frames of the checks: the learner's cell and code only."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not _in_the_checks(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out: types.TracebackType | None = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def _show_without_the_checks(err: AssertionError) -> AssertionError:
    """Make IPython show a check's failure as the learner's cell, the learner's own error if any, and the message.

    IPython hides the frames that set ``__tracebackhide__`` but always shows the last one, which for a
    failed check is the check's own source (its table of known mistakes, the ``raise``): noise above the
    message that explains the mistake. IPython formats an exception with a ``_render_traceback_``
    method by calling it instead, so the failure gets one that leaves out every frame of the checks:
    what remains is the cell that called the check and, when the learner's code raised, that error
    with the learner's frames. The exception stays a plain ``AssertionError`` (the grader and
    ``pytest.raises`` see no difference), and a script run by Python prints the usual full traceback.
    """
    def render() -> list[str]:
        saved = (err.__traceback__, err.__cause__, err.__suppress_context__)
        learner = err.__cause__  # the learner's own error (see call_learner), past the checks' re-raised ones
        seen: set[int] = set()
        while learner is not None and _without_the_checks(learner.__traceback__) is None and id(learner) not in seen:
            seen.add(id(learner))
            learner = learner.__cause__
        learner_tb = learner.__traceback__ if learner is not None else None
        try:
            err.__traceback__ = _without_the_checks(saved[0])
            err.__cause__, err.__suppress_context__ = learner, True
            if learner is not None:
                learner.__traceback__ = _without_the_checks(learner_tb)
            from IPython import get_ipython
            from IPython.core.ultratb import AutoFormattedTB

            shell = get_ipython()
            formatter = shell.InteractiveTB if shell is not None else AutoFormattedTB(mode="Context", tb_offset=1)
            return list(formatter.structured_traceback(type(err), err, err.__traceback__))
        except Exception:  # noqa: BLE001 - never let the formatting hide the message
            import traceback

            return traceback.format_exception_only(type(err), err)
        finally:
            err.__traceback__ = saved[0]
            err.__cause__, err.__suppress_context__ = saved[1], saved[2]
            if learner is not None:
                learner.__traceback__ = learner_tb

    err._render_traceback_ = render  # type: ignore[attr-defined]
    return err


def report_passed(task: int | str | None, summary: str) -> None:
    if OUTSIDE:  # the results are right, but the task's operations were not used: isolated says so instead
        return
    print(f"✓ Task {task} passed: {summary}" if task is not None else f"✓ passed: {summary}")


def shape_text(t: Tensor | torch.Size | Sequence[int]) -> str:
    dims = tuple(t.shape) if isinstance(t, Tensor) else tuple(t)
    return "(" + ", ".join(str(d) for d in dims) + ")"


def describe(x: Any) -> str:
    if isinstance(x, Tensor):
        return f"a {str(x.dtype).replace('torch.', '')} tensor {shape_text(x)}"
    return repr(x)


def callable_name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def call_text(fn: Any, *args: Any, names: Sequence[str] = ()) -> str:
    """``my_attention(query (2, 4, 8), key (2, 4, 8), ...)``: the call, with shapes instead of numbers."""
    parts = [f"{n} {shape_text(a)}" if isinstance(a, Tensor) and n else describe(a)
             for a, n in zip(args, [*names, *[""] * len(args)])]
    return f"{callable_name(fn)}(" + ", ".join(parts) + ")"


def _copy(x: Any, memo: dict[int, Any]) -> Any:
    """``x`` with every tensor cloned (shared tensors stay shared) and every list, tuple and dict rebuilt."""
    if isinstance(x, Tensor):
        if id(x) not in memo:
            memo[id(x)] = x.clone()
        return memo[id(x)]
    if type(x) in (list, tuple):
        return type(x)(_copy(v, memo) for v in x)
    if type(x) is dict:
        return {k: _copy(v, memo) for k, v in x.items()}
    return x


def _same(a: Any, b: Any) -> bool:
    """Whether the learner's copy ``a`` still equals the check's original ``b`` (NaN equals NaN)."""
    if isinstance(b, Tensor):
        if not isinstance(a, Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(((a == b) | (a != a) & (b != b)).all()) if b.is_floating_point() else torch.equal(a, b)
    if type(b) in (list, tuple, dict):
        if type(a) is not type(b) or len(a) != len(b) or (type(b) is dict and list(a) != list(b)):
            return False
        return all(_same(x, y) for x, y in (zip(a.values(), b.values()) if type(b) is dict else zip(a, b)))
    return a is b


def call_learner(fn: Callable[..., Any], *args: Any, text: str | None = None, in_place: str | None = None) -> Any:
    """Call the learner's code; any error other than NotImplementedError becomes an explained AssertionError.

    The learner's code gets copies of the tensors, lists and dicts in ``args``: the check's own inputs stay
    as it drew them, whatever the code does to its arguments, so an expected value computed from them after
    the call is still right. A copy changed in place fails the call (``in_place``: the message, after the call).
    """
    __tracebackhide__ = True
    global LEARNER_DEPTH
    given = _copy(args, {})
    recorder = operations.Recorder() if not REMOTE and (ALLOWED is not None or OBSERVE is not None) else None
    LEARNER_DEPTH += 1
    try:
        result = fn(*given) if recorder is None else recorder.call(fn, *given)
    except NotImplementedError:
        raise
    except Exception as err:  # the learner's bug: say which call raised it
        raise AssertionError(f"{text or call_text(fn, *args)} raised {type(err).__name__}: {err}") from err
    finally:
        LEARNER_DEPTH -= 1
    if recorder is not None:
        judge_operations(recorder.ops)
    if not _same(given, args):
        raise AssertionError(f"{text or call_text(fn, *args)} "
                             f"{in_place or 'changed its inputs in place: compute new tensors instead'}")
    return result


def build_learner(cls: type[nn.Module], *args: Any) -> nn.Module:
    __tracebackhide__ = True
    module = call_learner(cls, *args, text=call_text(cls, *args))
    if not isinstance(module, nn.Module):
        raise AssertionError(f"{call_text(cls, *args)} built a {type(module).__name__}; expected a subclass of nn.Module")
    return module.eval()  # dropout off: the checks compare exact numbers


def make_rng() -> torch.Generator:
    return torch.Generator().manual_seed(SEED)


def random_tensor(g: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * scale


@torch.no_grad()
def fill_parameters(module: nn.Module, g: torch.Generator, scale: float = 0.5) -> None:
    """Random values for every parameter, biases and LayerNorm gains included, so each one matters."""
    for name, p in module.named_parameters():
        if re.search(r"norm\d*\.weight$", name):  # LayerNorm gains stay near 1
            p.copy_(1.0 + random_tensor(g, *p.shape, scale=0.3))
        else:
            p.copy_(random_tensor(g, *p.shape, scale=scale / math.sqrt(p.size(-1)) if p.dim() > 1 else scale))


def all_close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True)


def expect_tensor(x: Any, text: str, wanted: str) -> Tensor:
    __tracebackhide__ = True
    if not isinstance(x, Tensor):
        raise AssertionError(f"{text} returned {type(x).__name__}; expected a torch.Tensor {wanted}")
    return x


def expect_shape(x: Tensor, shape: Sequence[int], text: str, what: str, hints: dict[tuple[int, ...], str] | None = None) -> None:
    __tracebackhide__ = True
    if tuple(x.shape) != tuple(shape):
        hint = (hints or {}).get(tuple(x.shape), "")
        raise AssertionError(f"{text}: the {what} has shape {shape_text(x)} but expected {shape_text(shape)}." + (f" {hint}" if hint else ""))


def expect_bool(x: Tensor, text: str) -> None:
    __tracebackhide__ = True
    if x.dtype != torch.bool:
        raise AssertionError(
            f"{text} returned a {str(x.dtype).replace('torch.', '')} tensor; a mask must be torch.bool "
            "(True = may attend). A comparison such as `tokens != pad_id` already gives one."
        )


def _first_difference(given: Tensor, expected: Tensor, atol: float, rtol: float) -> str:
    given, expected = given.double(), expected.double()
    bad = ~torch.isclose(given, expected, atol=atol, rtol=rtol, equal_nan=True)
    index = tuple(int(i) for i in bad.nonzero()[0])
    n_bad = int(bad.sum())
    return (f"at index {index} expected {expected[index].item():.4f} but got {given[index].item():.4f} "
            f"({n_bad} of {given.numel()} values differ)")


def known_mistake(given: Tensor, mistakes: Sequence[tuple[str, Callable[[], Tensor | None]]],
                   atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """The hint of the first known mistake whose result ``given`` matches, or None."""
    for hint, wrong in mistakes:
        try:
            candidate = wrong()
        except Exception:  # a mistake that does not apply to these shapes
            continue
        if candidate is not None and all_close(given, candidate, atol, rtol):
            return hint
    return None


def compare(given: Tensor, expected: Tensor, text: str, what: str,
             mistakes: Sequence[tuple[str, Callable[[], Tensor | None]]] = (), atol: float = 1e-5,
             rtol: float = 1e-4, fallback: Callable[[], str | None] | None = None) -> None:
    """Raise unless ``given`` matches ``expected``; name the mistake when ``given`` matches a known wrong version."""
    __tracebackhide__ = True
    expect_shape(given, expected.shape, text, what)
    if all_close(given, expected, atol, rtol):
        return
    hint = known_mistake(given, mistakes, atol, rtol)
    if hint is not None:
        raise AssertionError(f"{text}: wrong {what}. {hint}")
    extra = fallback() if fallback is not None else None
    raise AssertionError(f"{text}: wrong {what}: "
                         f"{_first_difference(given, expected, atol, rtol)}." + (f" {extra}" if extra else ""))


def linear_like(module: nn.Module, name: str, in_features: int, out_features: int, owner: str) -> nn.Module:
    """The learner's ``owner.name``, checked to be an ``nn.Linear(in_features, out_features)`` with a bias."""
    __tracebackhide__ = True
    layer = getattr(module, name, None)
    wanted = f"nn.Linear({in_features}, {out_features})"
    if layer is None:
        raise AssertionError(f"{owner} has no attribute `{name}`: create it in __init__ as self.{name} = {wanted}")
    weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    if not isinstance(weight, Tensor):
        raise AssertionError(f"{owner}.{name} is a {type(layer).__name__}; expected {wanted}")
    if tuple(weight.shape) != (out_features, in_features):
        hint = " (nn.Linear(in, out) stores its weight as (out, in): are in and out swapped?)" \
            if tuple(weight.shape) == (in_features, out_features) else ""
        raise AssertionError(f"{owner}.{name}.weight has shape {shape_text(weight)} but {wanted} has "
                             f"{shape_text((out_features, in_features))}{hint}")
    if not isinstance(bias, Tensor) or tuple(bias.shape) != (out_features,):
        raise AssertionError(f"{owner}.{name} must have a bias of shape ({out_features},) like {wanted} "
                             "(the paper's projections have one): drop bias=False")
    return layer


def first_output(out: Any) -> Any:
    """A module may return its output alone or ``(output, weights)`` like the package; take the output."""
    return out[0] if isinstance(out, (tuple, list)) and len(out) > 0 else out


def copy_linear(target: nn.Module, source: nn.Linear) -> None:
    target.weight.copy_(source.weight)  # type: ignore[operator]
    target.bias.copy_(source.bias)  # type: ignore[operator,union-attr]


def as_number(x: Any, text: str, wanted: str = "a number") -> float:
    """A Python float from the learner's int, float or one-element tensor."""
    __tracebackhide__ = True
    if isinstance(x, Tensor) and x.numel() == 1:
        return float(x.item())
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise AssertionError(f"{text} returned {describe(x)}; expected {wanted}")


def split_pair(result: Any, text: str, names: str) -> tuple[Any, Any]:
    """The two elements of a returned pair, or an explained AssertionError."""
    __tracebackhide__ = True
    if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 2:
        raise AssertionError(f"{text} returned {describe(result)}; expected a pair ({names})")
    return result[0], result[1]


@torch.no_grad()
def decoding_model(seed: int) -> Transformer:
    """A small random model whose greedy outputs depend on the source (tokens 0-3 are pad, bos, eos, unk)."""
    torch.manual_seed(seed)
    # Xavier: the random draws (and so the check's cases) stay those the check was written with.
    config = TransformerConfig.tiny(11, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                    dropout=0.0, tie_embeddings=False, embedding_init="xavier")
    model = Transformer(config).eval()
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0.0, 0.5)
    # A trained model never predicts padding or the start token; this one must not either.
    model.generator = nn.Linear(config.d_model, config.tgt_vocab_size)
    model.generator.weight.normal_(0.0, 0.5)
    model.generator.bias.zero_()
    model.generator.bias[[config.pad_id, 1]] = -1e4
    return model
