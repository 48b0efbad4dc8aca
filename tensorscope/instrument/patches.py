"""Wrapping the PyTorch entry points that matter for aliasing and autograd.

NOTE [Hot path]
A TorchFunctionMode or TorchDispatchMode sees every op but costs 1.3x to 1.8x on
a small training loop before recording anything. Instead, only the entry points
that create aliases, write in place, change ``requires_grad``, switch grad mode
or run backward are wrapped; every other op runs untouched at full speed.
Wrappers for alias/creation ops record only when called directly from the
program's own code (one frame check); in-place writes are always checked
against the tensors saved for backward (a dict lookup by storage), because an
optimizer or an ``nn.ReLU(inplace=True)`` writes from inside a library.

NOTE [Tensor is not a sequence]
Assigning a Python ``__getitem__`` to ``torch.Tensor`` makes CPython fill the
type's ``sq_item`` slot too, and from then on ``PySequence_Check(tensor)`` is
true: ``torch.tensor([loss_a, loss_b])`` (a list of 0-d tensors) then fails with
"len() of a 0-d tensor". After installing the wrappers the slot is cleared again,
so indexing goes through ``mp_subscript`` (our wrapper) exactly as before and a
tensor is no sequence, as under plain python.

NOTE [Warnings from wrapped calls]
A warning that torch's C++ code raises inside a wrapped call is located by python
at the innermost Python frame: the wrapper. Python's "default" filter keys its
registry on module and line, so every line of the program that triggered the same
warning through the same wrapper would share one entry and the warning would show
once. The ``_showwarnmsg`` hook therefore undoes what ``warn()`` recorded for the
wrapper's frame and issues the warning again with ``warn_explicit`` at the program's
frame: its module's filters, its ``__warningregistry__``, its line, as python does.
The first pass still matches the filters against tensorscope's module, so a filter
that singles out a module (``default::DeprecationWarning:__main__``) is not seen
for warnings raised inside wrapped calls (README, Known limits).

NOTE [Invisible frames]
A wrapper that lets an exception through removes its own frame (and any other
tensorscope frame) from the traceback before re-raising, so ``traceback``
output inside the program is what plain python prints. So does the path that
skips the recording (no recorder, a paused one, a tensor it does not inspect):
an exception in a thread goes to ``threading.excepthook`` as it is, not
through the runner's strip, so only the wrapper can take its frame out (see
NOTE [Pausing the recorder] in tracker.py for the run that showed it).
"""

from __future__ import annotations

import os
import sys
import threading
import types
import warnings
import weakref
from contextlib import contextmanager

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from tensorscope import compat, warnfilters
from tensorscope.instrument import saved, state
from tensorscope.instrument import foreach_writes, gradhooks, indexwrite, provenance
from tensorscope.instrument import growth as _growth
from tensorscope.instrument.calls import after_call, target as _target
from tensorscope.instrument.frames import _LINES, is_tensorscope_file, strip_for_reraise, strip_traceback
from tensorscope.instrument.indexwrite import INDEX_WRITES
from tensorscope.instrument.kept import EXTERNAL
from tensorscope.instrument.optimizer_steps import IN_STEP as _IN_STEP, LANES as _LANES, NOT_WHOLE as _NOT_WHOLE
from tensorscope.instrument.optimizer_steps import _Step
from tensorscope.instrument.quiet import function_modes as _function_modes, tf_off as _tf_off
from tensorscope.instrument.quiet import unseen_by_modes as _unseen, _LOUD
from tensorscope.instrument.recorder import _INSPECTABLE, inspectable
from tensorscope.instrument.speedups import counted_write as _counted_write, lane_write as _lane_write
from tensorscope.instrument.speedups import storage_key as _compiled_storage_key
from tensorscope.instrument.recorder import _ONE_AGGREGATED
from tensorscope.instrument.records import MAX_LOGGED_STORAGES as _MAX_LOGGED_STORAGES
from tensorscope.instrument.records import MAX_WRITES_PER_STORAGE as _MAX_WRITES_PER_STORAGE
from tensorscope.instrument.runningstats import CODES as _RUNNING_STATS_CODES
from tensorscope.instrument.tracker import IN_WRITE as _IN_WRITE
from tensorscope.instrument.transparent import Transparent, named, transparent_property

_Tensor = torch.Tensor
_TensorBase = torch._C.TensorBase
_ref = weakref.ref

# In-place Tensor methods that are not writes of data, or are handled apart.
_NOT_WRITES = {
    "requires_grad_", "share_memory_", "detach_", "_coalesced_", "_dtensor__new__",
    "resize_as_sparse_", "sparse_resize_", "sparse_resize_and_clear_", "squeeze_", "unsqueeze_",
    "t_", "transpose_", "swapaxes_", "swapdims_", "as_strided_",
}
_INPLACE_DUNDERS = {
    "__iadd__": "iadd", "__isub__": "isub", "__imul__": "imul", "__itruediv__": "itruediv",
    "__idiv__": "idiv", "__ifloordiv__": "ifloordiv", "__imod__": "imod", "__ipow__": "ipow",
    "__iand__": "iand", "__ior__": "ior", "__ixor__": "ixor", "__ilshift__": "ilshift",
    "__irshift__": "irshift", "__setitem__": "setitem",
}
# Ops that return a tensor sharing storage with their input.
ALIAS_METHODS = {
    "detach": True, "view": True, "view_as": True, "reshape": True, "reshape_as": True,
    "expand": True, "expand_as": True, "as_strided": True, "t": True, "transpose": True,
    "permute": True, "squeeze": True, "unsqueeze": True, "flatten": True, "unflatten": True,
    "narrow": True, "select": True, "unbind": True, "split": True, "chunk": True,
    "diagonal": True, "movedim": True, "swapaxes": True, "unfold": True, "__getitem__": True,
    "view_as_real": True, "real": False, "imag": False,
}
COPY_METHODS = ("clone", "contiguous", "to", "cuda", "cpu", "new_tensor", "double", "float", "half",
                "numpy", "item", "tolist", "new_zeros", "new_ones", "new_empty", "new_full", "type")
FACTORIES = ("tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
             "randint", "arange", "linspace", "eye", "zeros_like", "ones_like", "empty_like",
             "full_like", "rand_like", "randn_like", "randperm", "clone", "stack", "cat",
             "frombuffer", "from_dlpack", "asarray")


def _hide_sequence_protocol(cls) -> None:
    """Clear ``cls``'s ``sq_item`` slot when our ``__getitem__`` filled it (see NOTE [Tensor is not a sequence])."""
    try:
        import ctypes

        if sys.implementation.name != "cpython":
            return
        check = ctypes.pythonapi.PySequence_Check
        check.argtypes = [ctypes.py_object]
        probe = torch.empty(0)
        if not check(probe):
            return
        word = ctypes.sizeof(ctypes.c_void_p)
        seq_methods = ctypes.c_void_p.from_address(id(cls) + 13 * word).value  # tp_as_sequence
        # a heap type's PySequenceMethods live inside its own PyHeapTypeObject
        if not seq_methods or not id(cls) < seq_methods < id(cls) + type.__basicsize__:
            return
        sq_item = ctypes.c_void_p.from_address(seq_methods + 3 * word)
        old = sq_item.value
        sq_item.value = None
        if check(probe):
            sq_item.value = old
    except Exception:
        pass


_get_ident = threading.get_ident
_PAUSED = state.PAUSED  # see NOTE [Pausing the recorder] in tracker.py
_get_sequence_nr = torch._C._autograd._get_sequence_nr


def _programs(frame, user) -> bool:
    """``frame`` runs the program's own code: the cached verdict read without a call (``in user``
    only for a file not seen before)."""
    fn = frame.f_code.co_filename
    verdict = user._verdict.get(fn)
    return verdict is True or verdict is None and fn in user


def _write_under_modes(rec, orig, op, args, kwargs, target, frame, ident):
    """A write while the program's torch-function mode is on: read before and after with the modes off, the
    call itself with them on (NOTE [Our reads unseen by the program's torch-function modes] in quiet.py)."""
    with _tf_off():
        pre = rec.pre_write(target, frame)
    _IN_WRITE.add(ident)  # the mode calls the op again through this wrapper: recorded once
    try:
        out = orig(*args, **kwargs)
    except BaseException as e:
        with _tf_off():
            rec.on_error(e, op, target, frame, "write")
        strip_for_reraise(e)
        raise
    finally:
        _IN_WRITE.discard(ident)
    with _tf_off():  # as Tracker.write_call's reference path
        rec.post_write(pre, target, op, frame, args[1] if op == "copy_" and len(args) > 1 else None)
        if op in INDEX_WRITES:
            indexwrite.check(rec, op, args, kwargs, frame)
    return out


def make_write(op, orig):
    def write(*args, **kwargs):
        if _LANES:  # NOTE [A step's lane]: first, and nothing else read before it
            step = _LANES.get(sys._getframe(1))  # the caller's frame is a lane: its thread's step
            if step is not None and not step.busy:
                target = args[0] if args else kwargs.get("input", kwargs.get("self"))
                if _INSPECTABLE.get(type(target)) and not _function_modes():
                    v0 = target._version
                    step.busy = True  # the re-entry guard (as IN_WRITE is on the other paths)
                    try:
                        out = orig(*args, **kwargs)
                    except BaseException as e:
                        strip_for_reraise(e)
                        raise
                    finally:
                        step.busy = False
                    try:  # a step closed meanwhile by another thread (the run's end): nothing kept
                        known = step.index.get(id(target))
                        step.writes.append((known if known is not None else _ref(target), op, step.lib, v0,
                                            target._version))
                    except Exception:
                        pass
                    return out
        if _IN_STEP:
            step = _IN_STEP.get(_get_ident())
            if step is not None and step.busy:  # inside a lane's call: a TorchFunctionMode or a subclass sent it here again
                try:  # NOTE [Invisible frames]
                    return orig(*args, **kwargs)
                except BaseException as e:
                    strip_for_reraise(e)
                    raise
        rec = state.recorder
        ident = _get_ident()
        if rec is None or not rec.active or ident in _IN_WRITE or _PAUSED and ident in _PAUSED:
            # inside another write wrapper: a TorchFunctionMode (e.g. set_default_device) sent the
            # op through the wrappers a second time; the outer call records it once
            try:  # NOTE [Invisible frames]
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                raise
        target = args[0] if args else kwargs.get("input", kwargs.get("self"))  # _target, inlined
        verdict = _INSPECTABLE.get(type(target))  # inspectable()'s cache, read without a call
        if not (verdict or verdict is None and inspectable(target)):
            try:  # NOTE [Invisible frames]
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                raise
        frame = sys._getframe(1)
        if _function_modes():  # NOTE [Our reads unseen by the program's torch-function modes] in quiet.py
            return _write_under_modes(rec, orig, op, args, kwargs, target, frame, ident)
        if _IN_STEP:  # see NOTE [An optimizer step as one write record]
            step = _IN_STEP.get(ident)
            if step is not None:
                try:
                    out = step.write(orig, op, target, args, kwargs, frame, ident)
                except BaseException as e:
                    strip_for_reraise(e)
                    raise
                if out is not _NOT_WHOLE:
                    return out
        try:  # the recorder's frame, the call and the record in one (see NOTE [The write fast path])
            out = rec.write_call(orig, op, args, kwargs, target, frame, ident)
        except BaseException as e:  # the program's exception: this frame out of its traceback too
            strip_for_reraise(e)
            raise
        if op in INDEX_WRITES:
            indexwrite.check(rec, op, args, kwargs, frame)
        return out

    # NOTE [The compiled lane] in speedups.py: the lane above in C where the accelerator is built, and a counted
    # line's writes (NOTE [A counted write, compiled])
    body = _lane_write(op, orig, write, _LANES, _INSPECTABLE, _function_modes, _Step)
    # (its storage key read in place where found: NOTE [A storage key read in place] in speedups.py)
    return named(_counted_write(body, state, _IN_STEP, _IN_WRITE, _PAUSED, _LINES, _get_sequence_nr,
                                torch.is_grad_enabled, _compiled_storage_key() or compat.storage_key,
                                _write_failed, _ONE_AGGREGATED,
                                _RUNNING_STATS_CODES, op in INDEX_WRITES, _MAX_LOGGED_STORAGES,
                                _MAX_WRITES_PER_STORAGE), orig)


def _write_failed(rec, e, op, target, frame):
    """The compiled counted write's ``except`` clause (``Tracker.write_call``'s): the failure recorded, tensorscope's
    frames stripped."""
    rec.on_error(e, op, target, frame, "write")
    strip_traceback(e)


def _written_lists(name: str) -> tuple | None:
    """The (position, name) of each tensor-list argument that torch's schema of ``aten.NAME`` marks as
    written (``Tensor(a!)[]``), or None when the schema cannot be read.

    NOTE [Fused optimizer kernels]
    ``torch._fused_adam_`` and its kin (``_fused_adamw_``, ``_fused_sgd_``, ``_fused_adagrad_``: the
    ``fused=True`` steps) write several lists in one call: the parameters, and the gradients and state
    lists their schemas mark as written. Torch bumps the version of every tensor of those lists, so they
    are recorded as a ``_foreach_`` write is, one write per tensor, with the lists read from the schema
    rather than listed here."""
    try:
        schema = getattr(torch.ops.aten, name).default._schema
        return tuple((i, a.name) for i, a in enumerate(schema.arguments)
                     if a.alias_info is not None and a.alias_info.is_write)
    except Exception:  # a release whose schema objects differ: the first list only, as a _foreach_ write
        return None


def make_foreach_write(op, orig, written=None):
    def targets_of(args, kwargs):
        if written is None:
            return _target(args, kwargs)
        found = []
        for i, name in written:
            lst = args[i] if i < len(args) else kwargs.get(name)
            if isinstance(lst, (list, tuple)):
                found.extend(t for t in lst if isinstance(t, _Tensor))
        return found

    def write(*args, **kwargs):
        rec = state.recorder
        if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED:
            try:  # NOTE [Invisible frames]
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                raise
        targets = targets_of(args, kwargs)
        frame = sys._getframe(1)
        # under a program's torch-function mode: the generic path below, read unseen by the mode
        # (NOTE [Our reads unseen by the program's torch-function modes] in quiet.py)
        modes = _function_modes()
        if _IN_STEP and not modes and isinstance(targets, (list, tuple)):  # see NOTE [An optimizer step as one write record]
            step = _IN_STEP.get(_get_ident())
            if step is not None:
                try:
                    out = step.write_many(orig, op, targets, args, kwargs, frame)
                except BaseException as e:
                    strip_for_reraise(e)
                    raise
                if out is not _NOT_WHOLE:
                    return out
        if not modes and isinstance(targets, (list, tuple)):  # see NOTE [A foreach write as one write record]
            try:
                out = foreach_writes.write_many(rec, orig, op, targets, args, kwargs, frame)
            except BaseException as e:
                strip_for_reraise(e)
                raise
            if out is not foreach_writes.NOT_WHOLE:
                return out
        with _tf_off() if modes else _LOUD:
            pres = [rec.pre_write(t, frame) for t in targets] if isinstance(targets, (list, tuple)) else []
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        with _tf_off() if modes else _LOUD:
            for pre, t in zip(pres, targets):
                rec.post_write(pre, t, op, frame)
        return out

    return named(write, orig)


def make_alias(op, orig, shares_counter):
    def after(rec, args, kwargs, out, frame):
        if _programs(frame, rec.user) and inspectable(out if not isinstance(out, (list, tuple)) else out[0] if out else None):
            rec.on_alias(op, args[0] if args else _target(args, kwargs), out, frame, shares_counter)

    return after_call(orig, after, op=op, where="alias", counted=True)  # NOTE [A counted line's calls]


_NOT_COUNTED = EXTERNAL | {"numpy", "from_numpy"}  # copies that keep a value or link outside memory (kept.py)

# NOTE [An array from np.asarray]
# ``np.asarray(t)`` (and ``np.array(t)``, ``np.asarray(t, dtype=...)``) asks the tensor for ``__array__``, which torch
# defines in Python (torch/_tensor.py, 2.2 to 2.15) as ``self.numpy()`` (then ``astype(dtype, copy=False)``): the
# ``numpy`` call's caller is torch's frame, NumPy's C code calls it from the program's line, and the array it returns
# is the one ``np.asarray`` gives the program when no copy is needed. So a ``numpy`` call from ``__array__`` is the
# program's, at the line of the frame below it: minGPT's chargpt with ``start["head"] =
# np.asarray(model.lm_head.weight.detach())`` kept at its first iteration logged a drift of 0.000000 (0.009955 with
# ``.copy()``) and the run was clean. Where NumPy copies (``np.array(t)``, another dtype) the array ``numpy()`` made
# dies at once and nothing is kept (NOTE [A NumPy array is a kept value] in kept.py).
_ARRAY_CODE = getattr(getattr(torch.Tensor, "__array__", None), "__code__", None)


def make_copy(op, orig, kind="copy"):
    def after(rec, args, kwargs, out, frame):
        src = args[0] if args else _target(args, kwargs)
        if op == "numpy" and frame is not None and frame.f_code is _ARRAY_CODE and frame.f_back is not None:
            frame = frame.f_back  # NOTE [An array from np.asarray]
        if out is src:
            # `x.to("cpu")` on a CPU tensor, `x.contiguous()` on a contiguous one, `x.float()` on a
            # float32, `torch.as_tensor(x)`: torch returns `x` itself, so nothing was copied or made
            return
        if (_programs(frame, rec.user) and (not isinstance(out, _Tensor) or inspectable(out))
                and (not isinstance(src, _Tensor) or inspectable(src))):
            rec.on_copy(op, src if kind == "copy" else None, out, frame, kind, kwargs,
                        first=src if kind == "create" else None)

    # NOTE [A counted line's calls]: not the ops that do more than count (a NumPy array kept, outside memory)
    return after_call(orig, after, op=op, where=kind, counted=op not in _NOT_COUNTED)


def make_state_dict(orig):
    """``module.state_dict()`` on a program line: its tensors are aliases the program may keep
    (see NOTE [Kept values] in kept.py)."""
    def after(rec, args, kwargs, out, frame):
        if frame.f_code.co_filename in rec.user and not kwargs.get("keep_vars"):
            rec.kept.on_state_dict(rec, out, frame)

    return after_call(orig, after)


def make_optimizer_state_dict(orig):
    """``optimizer.state_dict()`` on a program line: its state tensors are the optimizer's own (see NOTE [An
    optimizer's state_dict is its state] in kept.py)."""
    def after(rec, args, kwargs, out, frame):
        if args and frame.f_code.co_filename in rec.user:
            rec.kept.on_optimizer_state_dict(rec, args[0], out, frame)

    return after_call(orig, after)


def make_register_parameter(orig):
    """``module.<name> = param``: a parameter another live module holds is shared state (see NOTE [Shared state])."""
    def register_parameter(self, name, param):
        try:
            out = orig(self, name, param)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        rec = state.recorder
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and isinstance(param, _Tensor):
            rec.shared.on_register_parameter(rec, self, name, param, sys._getframe(1))
        return out

    return named(register_parameter, orig)


def buffer_registered(module, name, buffer):
    """A global buffer registration hook (``register_buffer``, and ``module.<buffer> = tensor``, which calls
    the hooks on every release, through ``register_buffer`` or not): a buffer another live module holds is
    shared state (see NOTE [Shared state]). Returns None: the buffer is registered as given."""
    rec = state.recorder
    if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and isinstance(buffer, _Tensor):
        with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes]
            rec.shared.on_register_parameter(rec, module, name, buffer, sys._getframe(1), buffer=True)


def module_registered(parent, name, module):
    """A global module registration hook (``teacher.backbone = student.backbone``, ``nn.Sequential(student.
    backbone, head)``): a module another live module holds is shared state (see NOTE [Shared state])."""
    rec = state.recorder
    if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and isinstance(module, torch.nn.Module):
        with _unseen():
            rec.shared.on_register_module(rec, parent, name, module, sys._getframe(1))


def module_forward_done(module, args, output):
    """The global forward hook while no backward call returned: a top-level module call is a step boundary
    (NOTE [Steps without backward] in growth.py). Returns None: the output is the module's own. Registered
    with ``always_call``: called from ``_call_impl``'s ``except`` branch too, it gives the exception python's
    traceback (NOTE [Python's traceback under the global forward hook] in growth.py)."""
    if output is None and _growth.on_forward_error(module):
        return None
    rec = state.recorder
    if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
        rec.growth_fwd.forward_done(module)


def optimizer_step_started(optimizer, args, kwargs):
    """The global optimizer step pre-hook (see NOTE [An optimizer step as one write record]). Returns None."""
    rec = state.recorder
    if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
        if _function_modes():  # ``_unseen()``, inlined: NOTE [Our reads unseen by the program's torch-function modes]
            with _tf_off():
                rec.steps.started(optimizer, args, kwargs)
        else:
            rec.steps.started(optimizer, args, kwargs)


def optimizer_step_finished(optimizer, args, kwargs):
    """The global optimizer step post-hook. Returns None."""
    rec = state.recorder
    if rec is not None and (rec.active and not (_PAUSED and _get_ident() in _PAUSED) or _IN_STEP):
        if _function_modes():  # ``_unseen()``, inlined
            with _tf_off():
                rec.steps.finished(optimizer, args, kwargs)
        else:
            rec.steps.finished(optimizer, args, kwargs)


def make_module_setstate(orig):
    """``copy.copy(model)``: a copy over the original's very tensors (see NOTE [Shared state])."""
    def __setstate__(self, state_):
        try:
            out = orig(self, state_)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        rec = state.recorder
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
            with _unseen():
                rec.shared.on_shallow_copy(rec, self, sys._getframe(1))
        return out

    return named(__setstate__, orig)


def make_optimizer_load(orig):
    """``opt.load_state_dict(sd)``: state tensors kept as they are, not copied (see NOTE [Shared state])."""
    def load_state_dict(self, state_dict, *args, **kwargs):
        try:
            out = orig(self, state_dict, *args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        rec = state.recorder
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and isinstance(state_dict, dict):
            rec.shared.on_optimizer_load(rec, self, state_dict, sys._getframe(1))
        return out

    return named(load_state_dict, orig)


def make_function_apply(orig):
    """``Fn.apply(...)``: tensors a custom Function's ctx holds as attributes (see NOTE [Shared state])."""
    def apply(cls, *args, **kwargs):
        try:
            out = orig(cls, *args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        rec = state.recorder
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
            rec.shared.on_function_apply(rec, cls, out, sys._getframe(1))
        return out

    wrapper = named(apply, orig)  # a C classmethod (torch 2.15) binds as one; a Python function needs classmethod()
    return wrapper if isinstance(orig, types.ClassMethodDescriptorType) else classmethod(wrapper)


def make_custom_backward(orig):
    """The engine's call of a custom Function's backward (``BackwardCFunction.apply``): watched by the gradient
    check while it looks for a backward origin (NOTE [A custom Function's backward, watched while it runs])."""
    def apply(self, *args):
        rec = state.recorder
        values = rec.values if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) else None
        grads = values.grads if values is not None else None
        try:
            if grads is not None and grads.watching_custom():
                return grads.custom_backward(self, orig, args)
            return orig(self, *args)
        except BaseException as e:
            strip_for_reraise(e)
            raise

    return named(apply, orig)


def make_requires_grad(orig):
    def requires_grad_(self, requires_grad=True):
        rec = state.recorder
        if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED or not inspectable(self):
            try:  # NOTE [Invisible frames]
                return orig(self, requires_grad)
            except BaseException as e:
                strip_for_reraise(e)
                raise
        try:
            out = orig(self, requires_grad)
        except BaseException as e:
            rec.on_error(e, "requires_grad_", self, sys._getframe(1), "requires_grad")
            strip_for_reraise(e)
            raise
        rec.on_requires_grad(self, bool(requires_grad), sys._getframe(1), "requires_grad_")
        return out

    return named(requires_grad_, orig)


# NOTE [A backward call handed to __torch_function__ is recorded once]
# ``torch.autograd.grad`` (and ``torch.autograd.backward`` on recent releases) hands the call to
# ``__torch_function__`` when a root or an input is a tensor subclass's, or a torch-function mode is on
# (``handle_torch_function(grad, ...)``, where ``grad`` is the module's attribute: this wrapper). The default
# ``Tensor.__torch_function__`` (or the mode) calls it again with subclasses off, and that call runs the engine.
# Both calls were recorded: two backward events for one backward (measured on 2.13: ``autograd.grad`` and
# ``autograd.backward`` of a root ``.as_subclass(Sub)``, and under a mode that passes calls on). The program's
# call is recorded, at its line (a mode of the program's calls the function from its ``__torch_function__``: that
# line is not the backward line); the call it is handed over as is only passed on: the first call in the same
# thread, while the program's call runs, whose roots are the same objects. Calls the engine makes meanwhile (a
# hook's ``autograd.grad``) are recorded as ever. A release whose function does not hand over (no
# ``handle_torch_function`` in its code: ``backward`` on 2.2) is recorded as before.
_HANDED: dict = {}  # thread id -> the roots' ids of the program's call being handed to __torch_function__


def _roots_and_handed(op, args, kwargs):
    """(the ids of the call's roots, whether torch's ``op`` hands it to ``__torch_function__``: torch's own test
    on its own arguments, the roots and the inputs)."""
    try:
        roots = args[0] if args else kwargs.get("tensors" if op == "backward" else "outputs")
        if op == "backward":
            inputs = args[5] if len(args) > 5 else kwargs.get("inputs")
        else:
            inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
        if inputs is None and type(roots) is _Tensor:  # a loss's backward(): only a mode hands it over
            return (id(roots),), _mode_on()
        seq = (roots,) if isinstance(roots, _Tensor) or roots is None else tuple(roots)
        ids = tuple(map(id, seq))
        if inputs is not None:
            if isinstance(inputs, dict):
                inputs = inputs.values()
            seq = seq + ((inputs,) if isinstance(inputs, _Tensor) else tuple(inputs))
        return ids, _has_torch_function(seq)
    except Exception:  # arguments torch refuses: the call is recorded, and torch's own error raised by it
        return None, False


_has_torch_function = torch._C._has_torch_function
_mode_on = getattr(torch._C, "_is_torch_function_mode_enabled", None) or (lambda: _has_torch_function(()))


# NOTE [Tensor.backward handed to __torch_function__]
# ``loss.backward()`` is ``Tensor.backward`` (torch/_tensor.py), a Python function that is not wrapped: it calls
# ``torch.autograd.backward``, the wrapper. Under a torch-function mode of the program's (or with a root of a
# subclass whose ``__torch_function__`` is the program's) it first hands itself over: ``handle_torch_function``
# calls the mode's ``__torch_function__``, which calls ``Tensor.backward`` again with the mode off, and that call
# reaches the wrapper. Its caller is then the inner ``Tensor.backward``, and the first program frame above it the
# mode's ``__torch_function__``: the backward was recorded at the mode's ``func(*args)`` line, not at the program's
# ``loss.backward()`` (measured on 2.13). When the caller is ``Tensor.backward`` called from a
# ``__torch_function__``, the frame taken is the outer ``Tensor.backward``'s, the same code a few frames up
# (``__torch_function__``, torch's dispatch, possibly ``super().__torch_function__``): the call the program made.
# A ``__torch_function__`` that calls ``torch.autograd.backward`` itself is its own line, as before.
_TENSOR_BACKWARD_CODE = getattr(getattr(_Tensor, "backward", None), "__code__", None)
_HANDED_DEPTH = 6  # frames between the two calls: __torch_function__, torch's dispatch, a super() call's


def _handing_caller(frame):
    """The outer ``Tensor.backward`` frame of a call handed to ``__torch_function__`` (NOTE above), else ``frame``."""
    f = frame.f_back
    code = frame.f_code
    for _ in range(_HANDED_DEPTH):
        if f is None:
            break
        if f.f_code is code:
            return f
        f = f.f_back
    return frame


def make_backward(op, orig):
    hands_over = "handle_torch_function" in getattr(getattr(orig, "__code__", None), "co_names", ())

    def backward(*args, **kwargs):
        rec = state.recorder
        handed = False
        if rec is not None and hands_over:  # NOTE [A backward call handed to __torch_function__ is recorded once]
            ident = _get_ident()
            ids, handed = _roots_and_handed(op, args, kwargs)
            if _HANDED and ids is not None and _HANDED.get(ident) == ids:
                del _HANDED[ident]  # the program's call, handed over: recorded there
                rec, handed = None, False
            elif handed:
                _HANDED[ident] = ids
        if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED:
            try:  # NOTE [Invisible frames]
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                raise
            finally:
                if handed:
                    _HANDED.pop(ident, None)
        try:
            if _IN_STEP:  # an optimizer step that raised: its writes logged before backward reads the log
                rec.steps.sweep()
            calls = rec.backward_calls
            frame = sys._getframe(1)  # the caller's, read once for the three callbacks
            if (frame.f_code is _TENSOR_BACKWARD_CODE and frame.f_back is not None
                    and frame.f_back.f_code.co_name == "__torch_function__"):
                frame = _handing_caller(frame)  # NOTE [Tensor.backward handed to __torch_function__]
            ctx = calls.before(op, args, kwargs, frame)
            values = rec.values  # see NOTE [Checking values at the sinks] in nonfinite.py
            if values is not None:
                values.before_backward(args, kwargs, frame)
            try:
                out = orig(*args, **kwargs)
            except BaseException as e:
                frame = None
                calls.after(ctx, e)
                strip_for_reraise(e)
                raise
            calls.after(ctx, None, out)
            if values is not None:
                values.after_backward(args, kwargs, frame)
            return out
        finally:
            if handed:
                _HANDED.pop(ident, None)

    return named(backward, orig)


def make_grad_mode(mode, action, orig):
    def method(self, *args, **kwargs):
        rec = state.recorder
        try:
            out = orig(self, *args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
            frame = sys._getframe(1)
            fn = frame.f_code.co_filename
            # a library's own `with torch.no_grad():` (an optimizer step) is never recorded: skip
            # the call for files known to be a library's, except torch's decorator (_contextlib.py)
            if rec.user._verdict.get(fn) is not False or fn.endswith("_contextlib.py"):
                rec.on_grad_mode(mode, action, frame)
        return out

    return named(method, orig)


def make_showwarnmsg(orig):
    """Show a warning where, and as often as, python would without tensorscope's wrappers.

    See NOTE [Warnings from wrapped calls].
    """
    runner_file = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runner.py")

    def _showwarnmsg(msg):
        if _PAUSED and _get_ident() in _PAUSED:  # tensorscope's own work (NOTE [Pausing the recorder] in tracker.py)
            return None  # warned inside torch on tensorscope's behalf (an op redone): not the program's warning
        reissue = None
        try:
            if is_tensorscope_file(msg.filename or ""):
                if msg.filename == runner_file:  # NOTE [A warning above the outermost frame] in compat.py
                    (msg.filename, msg.lineno), msg.line = compat.WARNING_ABOVE_THE_STACK, None
                else:
                    f = sys._getframe(1)
                    ours = None
                    while f is not None and (is_tensorscope_file(f.f_code.co_filename)
                                             or f.f_code.co_filename == warnings.__file__):
                        if ours is None and f.f_code.co_filename == msg.filename:
                            ours = f
                        f = f.f_back
                    if f is not None:
                        if _forget(msg, ours):
                            reissue = f
                        else:  # not located in a wrapper's frame: show it at the program's line
                            msg.filename, msg.lineno, msg.line = f.f_code.co_filename, f.f_lineno, None
        except Exception:
            reissue = None
        if reissue is None:
            return orig(msg)
        f = reissue
        g = f.f_globals
        module = g.get("__name__")
        registry = g.get("__warningregistry__")
        if not isinstance(registry, dict):  # python's warn() creates it in the warning frame's globals
            registry = g["__warningregistry__"] = {}
        # may raise (an "error" filter for the program's module): python would raise there too. No
        # module_globals, as python's own warn() passes none: on Python 3.13 they make warnings check
        # `__spec__.loader`, and a script's `__main__` (whose `__spec__` is None) gets a
        # DeprecationWarning "Module globals is missing a __spec__.loader" python never shows
        warnings.warn_explicit(msg.message, msg.category, f.f_code.co_filename, f.f_lineno,
                               module=module if isinstance(module, str) else "<string>",
                               registry=registry, source=msg.source)

    return _showwarnmsg


def _forget(msg, frame):
    """Undo what python's warn() recorded for a warning it located in tensorscope's frame.

    Returns True when done (the warning is then issued again at the program's frame).
    """
    if frame is None:
        return False
    text, category = str(msg.message), msg.category
    registry = frame.f_globals.get("__warningregistry__")
    if isinstance(registry, dict):
        registry.pop((text, category, msg.lineno), None)
        registry.pop((text, category, 0), None)  # the "module" action's key
    if _action(frame, text, category, msg.lineno) == "once":
        warnings.onceregistry.pop((text, category), None)
    return True


def _action(frame, text, category, lineno) -> str:
    """The action python's filters chose for a warning located in ``frame`` (as ``warn_explicit``)."""
    return warnfilters.action(text, category, frame.f_globals.get("__name__") or "<string>", lineno)


def make_compile(orig):
    def compile(*args, **kwargs):
        rec = state.recorder
        if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
            rec.note("torch.compile was used: what runs inside compiled graphs is not inspected "
                     "(their inputs, outputs, saved tensors and backward are)")
            rec.growth_fwd.stop()  # NOTE [Steps without backward]: no global hook under a compiled module
        try:  # NOTE [Invisible frames]
            return orig(*args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise

    return named(compile, orig)


class Patcher:
    """Installs the wrappers and takes every one of them back out."""

    def __init__(self):
        self._undo: list = []
        self._hooks: list = []  # handles of the global hooks registered for the run
        self._jit_builtins: list[int] = []
        self._planned: list | None = None

    def plan(self) -> list[tuple[object, str]]:
        """Every ``(owner, name)`` that ``install()`` replaces, without replacing anything.

        The transparency probe (tests/programs/introspect_wrappers.py) walks this list, so a
        wrapper added to ``install()`` is introspected without anyone listing it.
        """
        self._planned = []
        try:
            self.install()
            return list(self._planned)
        finally:
            self._planned = None

    def _set(self, owner, name, value):
        if self._planned is not None:
            self._planned.append((owner, name))
            return
        had = name in vars(owner)
        old = vars(owner).get(name)
        setattr(owner, name, value)
        self._undo.append((owner, name, had, old))
        if callable(value) and not isinstance(owner, type):
            self._keep_jit_builtin(value, value._orig if isinstance(value, Transparent) else None)

    def _keep_jit_builtin(self, wrapper, orig) -> None:
        """TorchScript resolves ``torch.zeros_like`` & co. by identity: register the wrapper as the same op."""
        if orig is None:
            return
        try:
            from torch.jit import _builtins

            op = _builtins._find_builtin(orig)
            if op is not None:
                _builtins._register_builtin(wrapper, op)
                self._jit_builtins.append(id(wrapper))
        except Exception:
            pass

    def install(self) -> None:
        t = _Tensor
        for name in dir(t):
            if name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES:
                orig = getattr(t, name, None)
                if callable(orig):
                    self._set(t, name, make_write(name, orig))
        for dunder, op in _INPLACE_DUNDERS.items():
            orig = getattr(t, dunder, None)
            if orig is not None:
                self._set(t, dunder, make_write(op, orig))
        for name in ("detach_",) + saved.METADATA_INPLACE:
            if callable(getattr(t, name, None)):
                self._set(t, name, make_write(name, getattr(t, name)))
        self._set(t, "requires_grad_", make_requires_grad(t.requires_grad_))
        self._set(t, "register_hook", gradhooks.make_register_hook(t.register_hook))
        for name, shares in ALIAS_METHODS.items():
            orig = getattr(t, name, None)
            if orig is not None and callable(orig) and not isinstance(orig, property):
                self._set(t, name, make_alias(name.strip("_"), orig, shares))
        for name in COPY_METHODS:
            orig = getattr(t, name, None)
            if orig is not None and callable(orig):
                self._set(t, name, make_copy(name, orig))
        # module-level functions
        for name in dir(torch):
            if name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES:
                orig = getattr(torch, name)
                if callable(orig) and not isinstance(orig, type):
                    self._set(torch, name, make_write(name, orig))
            elif name.startswith("_foreach_") and name.endswith("_"):
                self._set(torch, name, make_foreach_write(name, getattr(torch, name)))
            elif name.startswith("_fused_") and name.endswith("_"):  # NOTE [Fused optimizer kernels]
                self._set(torch, name, make_foreach_write(name, getattr(torch, name), _written_lists(name)))
        # F.relu_ & co. are the C functions themselves, bound at import time (F.relu(inplace=True) goes
        # through torch.relu_, wrapped above; wrapping those Python functions would record twice)
        functional = torch.nn.functional
        for name in dir(functional):
            if name.endswith("_") and not name.startswith("_"):
                orig = getattr(functional, name)
                if isinstance(orig, type(len)):
                    self._set(functional, name, make_write(name, orig))
        for name in dir(torch._C._nn):
            if name.endswith("_") and not name.startswith("_"):
                self._set(torch._C._nn, name, make_write(name, getattr(torch._C._nn, name)))
        self._install_vf()
        for name in FACTORIES:
            orig = getattr(torch, name, None)
            if orig is not None:
                kind = "copy" if name == "clone" else "create"
                self._set(torch, name, make_copy(name, orig, kind))
        if self._planned is None:
            _hide_sequence_protocol(t)
        self._install_properties()
        self._install_grad_modes()
        provenance.install(self._set)
        provenance.install_cuts(self._set)
        self._set(torch.autograd, "backward", make_backward("backward", torch.autograd.backward))
        self._set(torch.autograd, "grad", make_backward("grad", torch.autograd.grad))
        self._set(torch.autograd.graph, "disable_saved_tensors_hooks",
                  named(saved.disable_saved_tensors_hooks, torch.autograd.graph.disable_saved_tensors_hooks))
        self._set(torch, "compile", make_compile(torch.compile))
        self._set(torch.nn.Module, "state_dict", make_state_dict(torch.nn.Module.state_dict))
        self._set(torch.nn.Module, "register_parameter", make_register_parameter(torch.nn.Module.register_parameter))
        register_buffer_hook = getattr(torch.nn.modules.module, "register_module_buffer_registration_hook", None)
        if self._planned is None and register_buffer_hook is not None:
            self._hooks.append(register_buffer_hook(buffer_registered))
        register_module_hook = getattr(torch.nn.modules.module, "register_module_module_registration_hook", None)
        if self._planned is None and register_module_hook is not None:
            self._hooks.append(register_module_hook(module_registered))
        register_forward = getattr(torch.nn.modules.module, "register_module_forward_hook", None)
        rec = state.recorder
        if self._planned is None and register_forward is not None and rec is not None \
                and getattr(getattr(rec, "growth_fwd", None), "enabled", False):  # NOTE [Steps without backward]
            try:  # always_call: NOTE [Python's traceback under the global forward hook] in growth.py
                handle = register_forward(module_forward_done, always_call=True)
            except TypeError:
                handle = register_forward(module_forward_done)
            self._hooks.append(handle)
            rec.growth_fwd.handle = handle
        if self._planned is None:  # see NOTE [An optimizer step as one write record]
            self._hooks.append(register_optimizer_step_pre_hook(optimizer_step_started))
            self._hooks.append(register_optimizer_step_post_hook(optimizer_step_finished))
        self._set(torch.nn.Module, "__setstate__", make_module_setstate(torch.nn.Module.__setstate__))
        self._set(torch.optim.Optimizer, "load_state_dict", make_optimizer_load(torch.optim.Optimizer.load_state_dict))
        self._set(torch.optim.Optimizer, "state_dict", make_optimizer_state_dict(torch.optim.Optimizer.state_dict))
        apply = compat.function_apply()
        if apply is not None:
            self._set(torch.autograd.Function, "apply", make_function_apply(apply))
        backward_apply = vars(torch.autograd.function.BackwardCFunction).get("apply")
        if isinstance(backward_apply, types.FunctionType):
            self._set(torch.autograd.function.BackwardCFunction, "apply", make_custom_backward(backward_apply))
        self._set(warnings, "_showwarnmsg", named(make_showwarnmsg(warnings._showwarnmsg), warnings._showwarnmsg))
        self._install_dispatch_mode_guard()
        for owner, name, value in compat.saved_hooks_patches():  # see NOTE [Which saved-tensor hooks are on top]
            self._set(owner, name, named(value, getattr(owner, name)))  # introspects as torch's builtin

    def _install_vf(self) -> None:
        """In-place functions reached through ``torch._VF`` (``nn.Dropout(inplace=True)`` calls
        ``_VF.dropout_``, ``nn.Threshold(inplace=True)`` ``_VF.threshold_``): ``_VF`` is a module
        that looks every name up on ``torch._C._VariableFunctions`` in its ``__getattr__``, so the
        wrappers of ``torch.*_`` never see those calls. Its class's ``__getattr__`` is wrapped to hand
        out one write wrapper per in-place name; the module's own ``__dict__`` (``dir(torch._VF)``)
        stays as it is."""
        vf_type = type(getattr(torch, "_VF", None))
        orig = vars(vf_type).get("__getattr__")
        if not isinstance(orig, type(lambda: None)):
            return
        wrappers = {}

        def __getattr__(module, name):
            try:
                value = orig(module, name)
            except BaseException as e:  # AttributeError for a name torch has not: python's traceback
                strip_for_reraise(e)
                raise
            if not (name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES):
                return value
            w = wrappers.get(name)
            if w is None or w._orig is not value:
                w = wrappers[name] = make_write(name, value)
            return w

        self._set(vf_type, "__getattr__", named(__getattr__, orig))

    def _install_properties(self) -> None:
        data = _TensorBase.data
        requires_grad = _TensorBase.requires_grad
        get_data, set_data = data.__get__, data.__set__
        get_rg, set_rg = requires_grad.__get__, requires_grad.__set__

        def data_get(desc, obj, cls=None):
            if obj is None:
                return desc
            out = get_data(obj)
            rec = state.recorder
            if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED):
                frame = sys._getframe(1)
                if frame.f_code.co_filename in rec.user and inspectable(obj):
                    with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes]
                        rec.on_alias("data", obj, out, frame, False)
            return out

        def data_set(desc, obj, value):
            rec = state.recorder
            if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED:
                try:  # NOTE [Invisible frames]
                    return set_data(obj, value)
                except BaseException as e:
                    strip_for_reraise(e)
                    raise
            with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes]
                pre = rec.pre_write(obj, sys._getframe(1))
            try:
                set_data(obj, value)
            except BaseException as e:
                strip_for_reraise(e)
                raise
            with _unseen():
                rec.post_data_set(pre, obj, value, sys._getframe(1))

        def rg_get(desc, obj, cls=None):
            if obj is None:
                return desc
            return get_rg(obj)

        def rg_set(desc, obj, value):
            try:
                set_rg(obj, value)
            except BaseException as e:
                rec = state.recorder
                if rec is not None:
                    rec.on_error(e, "requires_grad", obj, sys._getframe(1), "requires_grad")
                strip_for_reraise(e)
                raise
            rec = state.recorder
            if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and inspectable(obj):
                with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes]
                    rec.on_requires_grad(obj, bool(value), sys._getframe(1), "requires_grad =")

        self._set(_Tensor, "data", transparent_property(data, data_get, data_set))
        self._set(_Tensor, "requires_grad", transparent_property(requires_grad, rg_get, rg_set))

    def _install_dispatch_mode_guard(self) -> None:  # see _entered_by_program
        """Step our saved-tensor hooks aside while the program's own TorchDispatchMode is active.

        With any saved-tensor hook, autograd detaches each unpacked tensor at dispatch level,
        which a dispatch mode would see as an extra ``aten.detach``. Saves made inside the
        program's dispatch modes are therefore not inspected (and said so).
        """
        from torch.utils._python_dispatch import TorchDispatchMode

        enter, exit_ = TorchDispatchMode.__enter__, TorchDispatchMode.__exit__
        popped: list = []

        def __enter__(self):
            out = enter(self)
            rec = state.recorder
            ours = rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and saved.hooks_on_top()
            if ours:
                saved.pop()
                if _entered_by_program(sys._getframe(1), rec.user):
                    rec.note("saved tensors inside the program's TorchDispatchMode are not inspected")
            popped.append((id(self), ours))
            return out

        def __exit__(self, *exc):
            try:
                return exit_(self, *exc)
            finally:
                for i in range(len(popped) - 1, -1, -1):
                    if popped[i][0] == id(self):
                        _, ours = popped.pop(i)
                        if ours:
                            saved.push()
                        break

        self._set(TorchDispatchMode, "__enter__", named(__enter__, enter))
        self._set(TorchDispatchMode, "__exit__", named(__exit__, exit_))

    def _install_grad_modes(self) -> None:
        for cls, mode in ((torch.no_grad, "no_grad"), (torch.enable_grad, "enable_grad"),
                          (torch.inference_mode, "inference_mode")):
            self._set(cls, "__enter__", make_grad_mode(mode, "enter", cls.__enter__))
            self._set(cls, "__exit__", make_grad_mode(mode, "exit", cls.__exit__))
        self._set(torch.set_grad_enabled, "__init__",
                  make_grad_mode("set_grad_enabled", "set", torch.set_grad_enabled.__init__))

    def uninstall(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
        for owner, name, had, old in reversed(self._undo):
            try:
                if had:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)
            except (AttributeError, TypeError):
                pass
        self._undo.clear()
        try:
            from torch.jit import _builtins

            table = _builtins._get_builtin_table()
            for key in self._jit_builtins:
                table.pop(key, None)
        except Exception:
            pass
        self._jit_builtins.clear()


@contextmanager
def installed():
    p = Patcher()
    p.install()
    try:
        yield p
    finally:
        p.uninstall()


def _entered_by_program(frame, user) -> bool:
    """True when a dispatch mode is entered by the program's own code (``with MyMode():``).

    torch.compile enters its own modes (FakeTensorMode, FunctionalTensorMode, ...) while it
    traces; those are not the program's, and saying so would be a false note. Subclasses'
    ``__enter__`` methods calling ``super().__enter__()`` are skipped to find the ``with`` line.
    """
    while frame is not None and frame.f_code.co_name == "__enter__":
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename in user
