"""tensorscope's own reads of a tensor, invisible to the program's subclasses and modes.

A program's ``__torch_function__`` subclass or ``TorchDispatchMode`` must not see tensorscope read
``.shape`` or take a checksum: each guard here switches those off for the reads inside it.
"""

from __future__ import annotations

import threading

import torch


class quiet_tf:
    """Our reads invisible to the program's __torch_function__, with its __torch_dispatch__ left on."""

    __slots__ = ("guard",)

    def __enter__(self):
        # the program's torch-function modes off too (NOTE [Our reads unseen by the program's torch-function modes])
        self.guard = torch._C.DisableTorchFunction()
        self.guard.__enter__()

    def __exit__(self, *exc):
        self.guard.__exit__(*exc)


class quiet:
    """Our own reads and detach invisible to the program's __torch_function__ and dispatch modes
    (autograd saves a tensor in C++ without either seeing it)."""

    __slots__ = ("guards",)
    _function_guard = torch._C.DisableTorchFunction  # modes too: NOTE [Our reads unseen by the program's torch-function modes]

    def __enter__(self):
        self.guards = (self._function_guard(),
                       torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)))
        for g in self.guards:
            g.__enter__()

    def __exit__(self, *exc):
        for g in reversed(self.guards):
            g.__exit__(*exc)


class quiet_all(quiet):
    """``quiet()`` with the program's torch-function modes switched off too (``torch.device(...)`` as a
    context, ``set_default_device``, a mode of its own): a finiteness check of ours entered from inside
    one must not reach the program's mode, nor, through it, the wrappers a program put on
    ``torch.Tensor``'s methods (a mode's ``func`` is ``torch.Tensor``'s attribute of that name)."""

    __slots__ = ()
    _function_guard = torch._C.DisableTorchFunction


_dispatch_modes = torch._C._len_torch_dispatch_stack

# NOTE [Our reads unseen by the program's torch-function modes]
# While a program's ``TorchFunctionMode`` is on (its own, a logging mode, ``with torch.device(...)``,
# ``set_default_device``, dynamo's fake copy of a compiled module on torch 2.2), every read of a tensor's
# metadata (``.shape``, ``._version``, ``stride()``, ``data_ptr()``) goes through the mode's
# ``__torch_function__``: without a guard the mode sees each tensorscope record's reads as the program's ops
# (about 28 calls a recorded op). So a wrapper that records while a mode is on (``function_modes()``, one C
# call) reads under ``DisableTorchFunction`` (the mode and subclasses off for the thread, put back after)
# and calls torch's own function with the program's modes on, as python does: the mode sees the op once.
# Under a mode a write takes the generic ``pre_write``/``post_write`` path (no whole optimizer step).
_function_modes = torch._C._len_torch_function_stack
function_modes = _function_modes
tf_off = torch._C.DisableTorchFunction  # see NOTE [Our reads unseen by the program's torch-function modes]
_PLAIN = (torch.Tensor, torch.nn.Parameter)


class _Loud:
    __slots__ = ()

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


_LOUD = _Loud()


def unseen_by_modes():
    """``tf_off()`` while a program's torch-function mode is on, else a guard that does nothing (NOTE [Our
    reads unseen by the program's torch-function modes]). The hot paths (a write, a counted call) test
    ``function_modes()`` in place instead."""
    return tf_off() if _function_modes() else _LOUD


# NOTE [Our ops unseen by the program's profiler]
# A program that profiles its own code (``torch.profiler.profile``, ``torch.autograd.profiler.profile``)
# gets every aten op its thread runs in the event list, through RecordFunction callbacks the dispatcher
# calls whatever dispatch keys are excluded: ``quiet()`` does not hide our ops from them. So while the
# thread's profiler is on (``_profiler_enabled``, a read of the thread's profiler state), our own tensor
# work (a finiteness check, a sum of gradients, a checksum of a saved tensor) runs with RecordFunction
# switched off for the thread (``_enable_record_function(False)``, the thread-local flag
# ``at::enableRecordFunction``; no message, unlike ``_toggle_collection_dynamic``, which logs a warning
# to stderr at every call) and switched on again after. With no profiler on this costs one C call.
# PyTorch offers no read of that flag: a program that switched RecordFunction off itself while its
# profiler runs would find it on again after our work (docs/how-it-works.md, Known limits). The memory
# our work allocates still reaches a profiler with ``profile_memory=True`` (the allocator reports to the
# profiler's state, not through RecordFunction), and a GPU profiler's CUDA activity still traces our kernels.
_profiler_on = getattr(torch._C._autograd, "_profiler_enabled", None)
_record_function = getattr(torch._C._autograd, "_enable_record_function", None)
if _profiler_on is None:
    _record_function = None  # no way to tell a profiler is on: our ops stay as they are


def profiling() -> bool:
    """Whether this thread's profiler records ops now (see NOTE [Our ops unseen by the program's profiler])."""
    return _record_function is not None and _profiler_on()


class unrecorded:
    """``inner`` (a guard of this module, or none) with RecordFunction off for the thread: our ops stay out of
    the program's profiler (see NOTE [Our ops unseen by the program's profiler])."""

    __slots__ = ("inner",)

    def __init__(self, inner=_LOUD):
        self.inner = inner

    def __enter__(self):
        depth = getattr(_unrecorded_depth, "n", 0)  # nested: only the outermost switches the flag back on
        _unrecorded_depth.n = depth + 1
        if not depth:
            _record_function(False)
        try:
            self.inner.__enter__()
        except BaseException:
            self._leave()
            raise

    def __exit__(self, *exc):
        try:
            self.inner.__exit__(*exc)
        finally:
            self._leave()

    @staticmethod
    def _leave():
        _unrecorded_depth.n -= 1
        if not _unrecorded_depth.n:
            _record_function(True)


_unrecorded_depth = threading.local()


def quiet_from_modes(tensors):
    """``quiet()`` while a program's dispatch mode (``quiet_all()``: or torch-function mode) is on and every
    tensor read is a plain one, else no guard.

    A hook of ours that computes on tensors (a finiteness check: ``sum``, ``isfinite``, ``.item()``)
    runs inside the program's ``with Mode():`` when the program's backward does, and the mode would
    record those ops as the program's. Subclass tensors keep their dispatch (a wrapper subclass has
    no storage of its own to compute on), and with no mode on the guard costs nothing. While the
    thread's profiler is on, the guard also keeps the ops out of it (``unrecorded``).
    """
    guard = _LOUD
    if (_dispatch_modes() or _function_modes()) and all(type(t) in _PLAIN for t in tensors if t is not None):
        guard = quiet_all() if _function_modes() else quiet()
    if _record_function is not None and _profiler_on():  # NOTE [Our ops unseen by the program's profiler]
        return unrecorded(guard)
    return guard
