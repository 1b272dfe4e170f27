"""The operations the learner's code runs while a check calls it, for the checks' lists of allowed operations.

A task asks the learner to build a piece (a softmax, a layer norm) out of smaller ones; PyTorch and the
package hold ready-made versions under more names than any list of forbidden names can follow
(``x.softmax``, ``torch.ops.aten._softmax``, ``F.multi_head_attention_forward``...). So a check lists what
the task allows (:data:`ALWAYS` and the task's own operations) and :class:`Recorder` records, while the
check calls the learner's code, every operation that code runs itself:

* each PyTorch operation (a ``TorchFunctionMode`` sees tensor methods, ``torch.*``, ``F.*``, ``torch.ops``
  and TorchScript alike), named by its base name (``x.softmax``, ``torch._softmax`` -> ``softmax``);
* each function of the package or of another installed library (sacreBLEU...) that the learner's code
  calls, as ``"top-level module:qualified name"`` (``"minitransformer:TokenBatchSampler.__iter__"``); what
  such a function runs inside is its own business (the package's model calls ``softmax``);
* what would hide work from the recording: a tensor subclass, PyTorch's function modes switched off,
  the profile hook replaced, a thread or process started by the learner's code, or a thread of the
  notebook's running its code during the call.

An operation counts as the learner's when the nearest frame below it that is neither PyTorch's, the
standard library's nor numpy's is the learner's code (or the call the check made): PyTorch's own modules
(``nn.Linear``) and Python's ``map`` are transparent, the package's functions are not. Library frames are
recognised by their module's real namespace and code object, not by names the learner can choose.
The grading sandbox runs this module beside the learner's code (see ``minitransformer_grader.runner``).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import types
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

# Operations every task allows: shapes, indexing, creation, conversion, elementwise arithmetic and
# comparison, and plain reductions. A task's subject (softmax, layer_norm, linear, embedding...) is never here.
ALWAYS: frozenset[str] = frozenset("""
    add radd iadd sub rsub isub mul rmul imul div rdiv idiv truediv rtruediv itruediv floordiv rfloordiv
    floor_divide true_divide neg negative pos abs pow rpow ipow sqrt rsqrt reciprocal square remainder fmod
    mod rmod clamp clip clamp_min clamp_max minimum maximum exp log log2 log10 log1p expm1 sign floor ceil
    round trunc lerp addcmul addcdiv sin cos
    eq ne lt le gt ge equal isclose allclose isnan isinf isfinite logical_and logical_or logical_not
    logical_xor and rand or ror xor invert bitwise_and bitwise_or bitwise_not bitwise_xor where masked_fill
    any all sum mean max min amax amin argmax argmin prod count_nonzero nonzero cumsum sort argsort topk
    shape size dim ndim ndimension numel nelement dtype device is_floating_point is_complex requires_grad
    is_leaf grad data T mT H mH layout is_cuda is_cpu is_sparse is_contiguous stride storage_offset
    itemsize element_size names
    view view_as reshape reshape_as transpose swapaxes swapdims permute contiguous unsqueeze squeeze
    expand expand_as repeat repeat_interleave flatten unflatten cat concat concatenate stack hstack vstack
    split chunk narrow select getitem setitem unbind gather scatter index_select masked_select take
    take_along_dim tril triu flip roll movedim moveaxis t diagonal diag_embed diag broadcast_to
    broadcast_tensors atleast_1d atleast_2d squeeze_ unsqueeze_ index_put index_fill index_add
    tensor as_tensor from_numpy zeros ones full empty arange eye linspace zeros_like ones_like full_like
    empty_like rand_like randn_like new_zeros new_ones new_full new_empty new_tensor clone detach copy
    to float double half bfloat16 long int short bool byte char type type_as cpu cuda item tolist numpy
    len iter contains bool float int index hash repr str format reduce_ex deepcopy array
    fill zero requires_grad_ retain_grad grad_fn set_grad_enabled uniform normal kaiming_uniform kaiming_normal
    xavier_uniform xavier_normal trunc_normal constant calculate_fan_in_and_fan_out
    rand randn randint randperm rand_like randn_like randint_like manual_seed get_default_dtype as_subclass is_tensor is_grad_enabled is_inference_mode_enabled result_type
    promote_types can_cast finfo iinfo
""".split())

# Groups the checks' lists share.
MATMUL = ("matmul", "mm", "bmm", "mv", "einsum", "outer", "tensordot", "dot", "rmatmul", "imatmul")
LINEAR = (*MATMUL, "linear", "addmm", "baddbmm", "addmv", "addbmm")
SOFTMAX = ("softmax", "log_softmax")
MASKS = ("minitransformer:make_padding_mask", "minitransformer:make_causal_mask", "minitransformer:make_target_mask")
# The package's sub-layers, which a task that assembles a layer may use.
PIECES = tuple(f"minitransformer:{c}.{m}" for c in ("MultiHeadAttention", "PositionwiseFeedForward", "LayerNorm")
               for m in ("__init__", "forward"))

LEARNER, TRANSPARENT, CHECKS = "learner", "transparent", "checks"  # and a library function's label
_TRANSPARENT_TOPS = frozenset({"torch", "numpy", "minitransformer_grader", "typing_extensions"} |
                              set(getattr(sys, "stdlib_module_names", ())))
_HERE = __name__
_LIBRARY_DIRS = tuple({os.path.realpath(p) + os.sep for p in
                       (sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib"),
                        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                       if p} | {os.path.realpath(p) + os.sep for p in sys.path
                                if p.endswith(("site-packages", "dist-packages"))})
_CACHE: dict[int, tuple[Any, str]] = {}  # id(code) -> (code, what it is): code objects compare by value
_SERVICES: dict[int, Any] = {}  # id(code) -> code of the grading runner's own requests (what they run is not the learner's)


def service(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` (the sandbox's runner sending a request to the grader) as not the learner's work."""
    _SERVICES[id(fn.__code__)] = fn.__code__
    return fn


def _escapes() -> dict[Any, str]:
    """Builtins that run work where the recording cannot follow: a new thread or process."""
    import _thread

    out: dict[Any, str] = {}
    for module, names in ((_thread, ("start_new_thread", "start_joinable_thread", "start_new")),
                          (os, ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"))):
        for name in names:
            if hasattr(module, name):
                out[getattr(module, name)] = f"{module.__name__}.{name} (work outside the recorded call)"
    try:
        import _posixsubprocess

        out[_posixsubprocess.fork_exec] = "subprocess (work outside the recorded call)"
    except (ImportError, AttributeError):
        pass
    return out


_ESCAPES = _escapes()


def op_key(name: str) -> str:
    """The base name of an operation: ``_softmax.default`` -> ``softmax``, ``__iadd__`` -> ``iadd``, ``add_`` -> ``add``."""
    return name.split(".")[0].strip("_")


def _torch_name(func: Any) -> tuple[str, str]:
    """(base name, what the learner wrote) of a PyTorch callable seen by the function mode."""
    name = str(getattr(func, "__name__", "") or type(func).__name__)
    owner = getattr(func, "__self__", None)
    if name == "__get__" and owner is not None:  # a property: x.shape, x.T
        name = str(getattr(owner, "__name__", name))
    module = getattr(func, "__module__", None)
    qualname = str(getattr(func, "__qualname__", ""))
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        shown = f"torch.ops.{getattr(func, 'namespace', 'aten')}.{name.split('.')[0]}"
    elif module is None or qualname.startswith(("TensorBase.", "Tensor.")):
        shown = f"Tensor.{name}"
    elif module in ("torch._C._nn", "torch._C._VariableFunctions", "torch._C._special", "torch._C._linalg"):
        shown = {"torch._C._nn": "torch.nn.functional", "torch._C._special": "torch.special",
                 "torch._C._linalg": "torch.linalg"}.get(module, "torch") + f".{name}"
    else:
        shown = f"{module}.{name}"
    if str(module).startswith("torch.autograd"):  # torch.autograd.grad is not the property x.grad
        return f"autograd.{op_key(name)}", shown
    return op_key(name), shown


def _resolves(module: Any, code: Any) -> bool:
    """Whether ``code`` is the code of the function its qualified name names in ``module`` (not a look-alike)."""
    obj: Any = module
    for part in code.co_qualname.split("."):
        space = getattr(obj, "__dict__", None)  # a module's or a class's namespace
        if not isinstance(space, (dict, types.MappingProxyType)):
            return False
        obj = space.get(part)
    for _ in range(8):
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, property):
            obj = obj.fget
        if obj is None:
            return False
        if getattr(obj, "__code__", None) is code:
            return True
        obj = getattr(obj, "__wrapped__", None)  # functools.wraps, torch.no_grad
    return False


def classify(frame: Any) -> str:
    """LEARNER, TRANSPARENT, CHECKS or ``"library:qualified.name"`` for the code ``frame`` runs."""
    code = frame.f_code
    hit = _CACHE.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    if _SERVICES.get(id(code)) is code:
        return CHECKS
    space = frame.f_globals
    name = space.get("__name__") if isinstance(space.get("__name__"), str) else ""
    module = sys.modules.get(name)
    real = module is not None and getattr(module, "__dict__", None) is space
    top = name.partition(".")[0]
    kind = LEARNER
    if real and (top in _TRANSPARENT_TOPS or name == _HERE):
        kind = TRANSPARENT
    elif real and top != "__main__" and \
            os.path.realpath(str(getattr(module, "__file__", "") or "")).startswith(_LIBRARY_DIRS):
        if not _resolves(module, code):  # a comprehension or closure of the library: what calls it decides
            kind = TRANSPARENT
        elif name.startswith("minitransformer.checks"):
            kind = CHECKS
        else:
            kind = f"{top}:{code.co_qualname}"
    if len(_CACHE) > 100_000:
        _CACHE.clear()
    _CACHE[id(code)] = (code, kind)
    return kind


class Recorder(TorchFunctionMode):
    """Records the operations and library functions the learner's code runs during :meth:`call`.

    ``ops`` maps each operation's key (a base name such as ``softmax``, or ``"library:Qualified.name"``)
    to what the learner's code called (``Tensor.softmax``). ``threads``: the idents of the threads that
    were there before the learner's code ran (another thread running the learner's code during the call
    is recorded); None: threads are not looked at (a notebook's own kernel has several).
    """

    def __init__(self, threads: set[int] | None = None) -> None:
        super().__init__()
        self.ops: dict[str, str] = {}
        self.boundary: Any = None
        self.inside = 0
        self.threads = threads

    def _owner(self, frame: Any) -> str | None:
        for _ in range(400):
            if frame is None:
                return None
            if frame is self.boundary:
                return LEARNER
            kind = classify(frame)
            if kind != TRANSPARENT:
                return kind
            frame = frame.f_back
        return LEARNER

    def _add(self, key: str, shown: str) -> None:
        if len(self.ops) < 200:
            self.ops.setdefault(key, shown)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.inside += 1  # the mode is off while it runs: the profile hook leaves what happens here alone
        try:
            if self._owner(sys._getframe(1)) == LEARNER:
                key, shown = _torch_name(func)
                self._add(key, shown)
            for t in types:  # wherever it is used: its own __torch_function__ would run unrecorded
                if not issubclass(t, torch.nn.Parameter) and t is not torch.Tensor and \
                        not str(getattr(t, "__module__", "")).startswith("torch"):
                    self._add("tensor subclass", f"a tensor subclass ({getattr(t, '__name__', '?')}) whose "
                                                 "operations are not recorded")
            return func(*args, **(kwargs or {}))
        finally:
            self.inside -= 1

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if self.inside:
            return
        if event == "call":
            kind = classify(frame)
            if kind not in (LEARNER, TRANSPARENT, CHECKS) and self._owner(frame.f_back) == LEARNER:
                self._add(kind, kind.replace(":", "'s ", 1))
        elif event == "c_call":
            if arg in _ESCAPES and self._owner(frame) == LEARNER:
                self._add("thread or process", _ESCAPES[arg])
            if not self._on_top() and classify(frame) == LEARNER:  # (PyTorch's own code pops the mode at times)
                self._switched_off()

    def _switched_off(self) -> None:
        self._add("recorder off", "torch._C.DisableTorchFunction or the function-mode stack "
                                  "(switches off the recording of operations)")

    def _on_top(self) -> bool:
        depth = torch._C._len_torch_function_stack()
        return torch._C._is_torch_function_mode_enabled() and depth > 0 and \
            torch._C._get_function_stack_at(depth - 1) is self

    def _others(self) -> None:
        """A thread of the notebook's (one that runs its code) alive during the call: its work is not recorded."""
        if self.threads is None:
            return
        for ident, frame in sys._current_frames().items():
            if ident == threading.get_ident() or ident in self.threads:
                continue
            for _ in range(200):
                if frame is None:
                    break
                if classify(frame) == LEARNER:
                    self._add("thread or process", "a thread started by the notebook (its work is not recorded)")
                    return
                frame = frame.f_back

    def call(self, fn: Callable[..., Any], *args: Any, after: Callable[[Any], Any] | None = None,
             **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with its operations recorded (and ``after(result)``, e.g. the result's encoding)."""
        self.boundary = sys._getframe()
        previous = sys.getprofile()
        self._others()
        with self:
            sys.setprofile(self._profile)
            threading.setprofile(self._profile)
            try:
                result = fn(*args, **kwargs)
                if after is not None:
                    result = after(result)
                if not self._on_top():
                    self._switched_off()
            finally:
                if sys.getprofile() != self._profile:
                    self._add("recorder off", "sys.setprofile (switches off the recording of calls)")
                sys.setprofile(previous)
                threading.setprofile(None)  # type: ignore[arg-type]
                self._others()
        return result


def outside(ops: dict[str, str], allowed: frozenset[str]) -> list[str]:
    """What the learner's code called that ``allowed`` (with :data:`ALWAYS`) does not list, as the learner wrote it."""
    return sorted({shown for key, shown in ops.items() if key not in allowed and key not in ALWAYS})


__all__ = ["ALWAYS", "LINEAR", "MASKS", "MATMUL", "PIECES", "SOFTMAX", "Recorder", "classify", "op_key", "outside",
           "service"]
