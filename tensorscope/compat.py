"""Every difference between the torch and Python releases tensorscope runs on, in one place.

Each difference is found by feature detection (``hasattr``, ``try``), never by comparing
version numbers, and has a ``NOTE`` below: what each release does and how it is handled.
The releases named in the notes are the ones measured (PyPI's builds, on the CPU; see
docs/compatibility.md for the matrix); a release in between behaves like its neighbours.

Where an old release cannot give a fact, the run goes on without it and the report says so
in a note, never with an internal error.
"""

from __future__ import annotations

import sys
import threading
import types
import warnings

import torch

_autograd = torch._C._autograd


# NOTE [The oldest torch: 2.2]
# pyproject.toml requires torch>=2.2, the oldest release the matrix passes (docs/compatibility.md).
# torch 2.1 (2.1.2 measured) is not supported: its tensor base class is ``torch._C._TensorBase``,
# renamed ``torch._C.TensorBase`` in 2.2, and the instrumentation reads the C methods off it in
# seven modules at import; past that, 2.1 was not run. 2.2 wheels were built against NumPy 1.x:
# with NumPy 2 torch warns at import and ``.numpy()`` fails, so 2.2 (and 2.3) want ``numpy<2``.

# NOTE [Which saved-tensor hooks are on top]
# tensorscope pushes its own default saved-tensor hooks (``explain``) and must know whether they
# are still the innermost ones: to step aside for ``torch.func`` transforms and for the program's
# TorchDispatchMode, and to pop them at the end of the run. torch 2.9 and later (measured on
# 2.9.1, 2.13.0, 2.15.0) read the stack's top with ``torch._C._autograd.
# _top_saved_tensors_default_hooks``. torch 2.2 to 2.6 (measured on 2.2.2 and 2.6.0) have no such
# reader, only ``_push_``/``_pop_saved_tensors_default_hooks``. There a shadow of the stack (one
# per thread, as the stack itself) is kept: tensorscope's own pushes, and the program's pushes
# seen through a wrapper of ``_push_``/``_pop_`` that the run installs (``saved_hooks_patches``, dressed as
# the builtins they replace, so they introspect as under python;
# ``torch.autograd.graph.saved_tensors_hooks`` and ``save_on_cpu`` call them by attribute).
# Hooks pushed before the run began are below ours, so "are ours on top" is still answered
# exactly; only "is any hook on the stack" is not, and nothing asks it any more (see
# NOTE [The version check is learnt in a fresh thread]).
_top = getattr(_autograd, "_top_saved_tensors_default_hooks", None)
_push = _autograd._push_saved_tensors_default_hooks
_pop = _autograd._pop_saved_tensors_default_hooks
CAN_READ_SAVED_HOOKS = _top is not None


class _Shadow(threading.local):
    def __init__(self):
        self.packs: list = []


_shadow = _Shadow()


def top_pack_hook():
    """The pack hook of the innermost default saved-tensor hooks of this thread, or None."""
    if _top is not None:
        top = _top(False)
        return None if top is None else top[0]
    packs = _shadow.packs
    return packs[-1] if packs else None


def push_saved_tensors_hooks(pack, unpack) -> None:
    _push(pack, unpack)
    if _top is None:
        _shadow.packs.append(pack)


def pop_saved_tensors_hooks() -> None:
    _pop()
    if _top is None and _shadow.packs:
        _shadow.packs.pop()


def saved_hooks_patches() -> list:
    """``(owner, name, replacement)`` for a run to install where the stack cannot be read."""
    if _top is not None:
        return []

    def _push_saved_tensors_default_hooks(pack, unpack):
        push_saved_tensors_hooks(pack, unpack)

    def _pop_saved_tensors_default_hooks():
        pop_saved_tensors_hooks()

    return [(_autograd, "_push_saved_tensors_default_hooks", _push_saved_tensors_default_hooks),
            (_autograd, "_pop_saved_tensors_default_hooks", _pop_saved_tensors_default_hooks)]


# NOTE [The version check is learnt in a fresh thread]
# The text of autograd's version error changed between releases: 2.2.2 to 2.11 name the backward
# node ("output 0 of SigmoidBackward0"), 2.13 and 2.15 the forward op ("output 0 of Sigmoid"),
# and the hint after "instead." moved too. tensorscope provokes one real error and keeps its
# style (see NOTE [The version check's text comes from the running torch] in saved.py). The
# provoking backward must not meet the program's saved-tensor hooks (they would see the save, and
# any hook switches the version check off): the stack of hooks is thread-local and a new thread
# starts with none, on every release, so the probe runs in a thread of its own and needs no
# reader of the stack. A named thread takes no number from ``threading``'s counter: the
# program's own threads keep the names they have under plain python.
def in_fresh_thread(fn) -> None:
    """Run ``fn()`` in a new thread, where no saved-tensor hooks or modes of the program apply."""
    worker = threading.Thread(target=fn, name="tensorscope-probe", daemon=True)
    worker.start()
    worker.join()


# NOTE [Storage keys on releases without _storage_address]
# tensorscope keys a storage by its StorageImpl address (see NOTE [Storage keys without storage
# objects] in recorder.py). ``torch._C._storage_address(t)`` reads it without making a Python
# storage object; it exists from 2.3 on (measured on 2.3.1 to 2.15.0) and not on 2.2.2. There
# ``torch._C._storage_id(t)`` (present on 2.2.2 to 2.15.0) reads the same address, also without a
# storage object: equal to ``t.untyped_storage()._cdata`` on plain, empty, zero-dimensional, meta and
# nested tensors, and raising the same NotImplementedError on sparse tensors and inside ``vmap``
# (measured on 2.2.2 and 2.15.0). ``t.untyped_storage()._cdata`` is the last resort: it costs one
# storage object per storage that torch keeps alive with the storage (visible in the program's
# ``gc.get_objects()``: 23 on a small Adam loop on 2.2.2 before ``_storage_id`` was used).
def _untyped_storage_address(t) -> int:
    return t.untyped_storage()._cdata


storage_key = (getattr(torch._C, "_storage_address", None) or getattr(torch._C, "_storage_id", None)
               or _untyped_storage_address)


# NOTE [A tensor's use count]
# A gradient that a tensor hook wrote in place reached another branch of the graph only if something
# else still holds that gradient when the hook runs (NOTE [Gradient hooks writing in place] in
# instrument/gradhooks.py): ``Tensor._use_count()``, the count of owners of its TensorImpl. It exists
# from 2.4 on (measured on 2.4.1 to 2.15.0) and not on 2.2.2 or 2.3.1, where no other reading tells
# the owners apart (``torch._C._WeakTensorRef`` says only whether any is left). There the check is
# not made and the report says so in its notes.
tensor_use_count = getattr(torch._C.TensorBase, "_use_count", None)
NO_USE_COUNT_NOTE = ("gradient hooks that write their argument in place are not checked: this torch has no "
                     "Tensor._use_count (torch 2.4 and later have it)")


# NOTE [Reading a saved tensor without its checks]
# When backward raised the version error under ``run`` (no hooks of ours), the stale saved variable
# is found on the graph and its tensor matched against the logged writes (NOTE [Stale saved variable
# without hooks] in instrument/stale.py). torch 2.10 and later (measured on 2.10.0, 2.13.0, 2.15.0)
# give ``SavedTensor.data`` (the tensor, read without the version check) and ``.unpack_hook``.
# torch 2.2 to 2.9 (measured on 2.2.2, 2.6.0, 2.9.1) have neither: only ``register_hooks``, and
# ``node._saved_x`` raises the version error itself. There the stale tensor is the program's live
# tensor that the error text describes: its shape, its version now and, for a tensor a node made,
# that node's name and output number (``stale.named_by_error``); where two tensors on different bytes
# fit the text, no culprit is named. Without ``unpack_hook`` a saved variable carrying the program's
# own hooks cannot be told apart, so on those releases reading the graph after the failure may call
# the program's unpack hook once more per saved variable read (the program's hooks also switch the
# version check off, so such a variable is never the stale one). A saved tensor detached in place
# (``detach_()``) does not make ``node._saved_x`` raise (measured on 2.2.2 and 2.13.0: only backward's own
# unpack does), so there the getter's value is the saved tensor matched against the logged ``detach_()``.
#
# NOTE [A view's node remade after a write]
# A view saved for backward (``y = b.view(-1, 1)``; ``torch.matmul(x, y)`` saves ``y``) whose version
# then moves through an alias autograd does not track (``y.detach().mul_(2)``) gets a new node the next
# time its ``grad_fn`` is read: ``AsStridedBackward0``, with a new sequence number, whose next function is
# the base's node (measured on 2.2.2, 2.6.0, 2.10.0, 2.13.0: the same on every release). The version
# error, raised when backward unpacks the saved view, names that new node ("output 0 of
# AsStridedBackward0"; "of AsStrided" from 2.13). The saving node's input edge still points at the old
# ``ViewBackward0``, so the new node is not reached from the saving node. Where ``SavedTensor.data``
# exists (2.10 on) the saved tensor is read directly and this does not matter; before 2.10 the tensor
# the error describes is also accepted when it is a view whose named node leads to the same base node
# (the same Python object: torch keeps one per node while it is held) as one of the saving node's
# inputs does (``stale._regenerated_view``). Two such views on different bytes still give no culprit.
_SavedTensor = getattr(_autograd, "SavedTensor", None)
CAN_READ_SAVED_DATA = _SavedTensor is not None and hasattr(_SavedTensor, "data")


def saved_data(raw):
    """The tensor of a ``SavedTensor`` read without PyTorch's checks; None where torch cannot give it."""
    return raw.data if CAN_READ_SAVED_DATA else None


def saved_unpack_hook(raw):
    """The unpack hook set on a ``SavedTensor``, or None (also where torch does not expose it)."""
    return getattr(raw, "unpack_hook", None)


# NOTE [Setting a version counter before torch 2.8]
# `torch._C._autograd._unsafe_set_version_counter` takes tuples, `((t,), (v,))`, from torch 2.8 on
# (measured on 2.8.0, 2.9.1, 2.10.0, 2.13.0); before that (2.2.2 to 2.6.0) it takes one tensor and one
# int, `(t, v)`, and the tuple form raises TypeError. The snapshot's probe of which tensors share a
# version counter sets a counter and puts it back; with the wrong form every probe raised, and a view
# and its base were reported with two counters. Which form this torch takes is tried once at import,
# on a tensor of our own.


def _set_version_tuple(t, v) -> None:
    torch._C._autograd._unsafe_set_version_counter((t,), (v,))


def _set_version_single(t, v) -> None:
    torch._C._autograd._unsafe_set_version_counter(t, v)


def _set_version_form():
    probe = torch.zeros(1)
    try:
        _set_version_tuple(probe, 1)
        return _set_version_tuple
    except TypeError:
        return _set_version_single


set_version_counter = _set_version_form()


# NOTE [Function.apply written in C from torch 2.15]
# Up to 2.14 `torch.autograd.Function.apply` is a Python classmethod (`vars(Function)["apply"]` is a
# `classmethod`, its `__func__` the function to wrap). On 2.15.0 it is a C classmethod descriptor
# (`classmethod_descriptor`), callable as `descriptor(cls, *args)`. The wrapper that finds tensors a
# custom Function's ctx holds as attributes (ctx-attribute-changed) checked only for `classmethod`, so
# on 2.15 it was never installed and the hazard went unreported. Both forms give a callable taking the
# class first; anything else is left unwrapped.


def function_apply():
    """The callable behind ``torch.autograd.Function.apply``, taking the class first, or None."""
    apply = vars(torch.autograd.Function).get("apply")
    if isinstance(apply, classmethod):
        return apply.__func__
    if isinstance(apply, types.ClassMethodDescriptorType):
        return apply
    return None


# NOTE [The unused input's index before torch 2.9]
# torch 2.9 and later (measured on 2.9.1, 2.13.0) name the input ``autograd.grad`` found unused: "The
# differentiated Tensor at index 1 appears to not have been used in the graph". torch 2.2 to 2.8 (measured
# on 2.2.2, 2.3.1, 2.4.1, 2.5.1, 2.6.0, 2.7.1, 2.8.0) say "One of the differentiated Tensors appears to not
# have been used in the graph", with no index. Told apart by the message itself, not the version: when it
# has no index, the wrapper of ``autograd.grad`` walks the outputs' graph (bounded) and records the first
# input whose ``grad_fn`` (or, for a leaf, whose ``AccumulateGrad`` node) it does not reach, as torch does
# (instrument/backward_calls.py); kinds/unused_input.py then names it as on 2.9.
_UNUSED_NO_INDEX = "One of the differentiated Tensors appears to not have been used in the graph"


def unused_input_without_index(message: str) -> bool:
    return _UNUSED_NO_INDEX in (message or "")


# NOTE [The origin mode crashes torch before 2.11]
# The non-finite origin mode (a TorchDispatchMode pushed for the whole run by ``explain`` and
# ``run --check-values``, instrument/nonfinite.py) ends the process with SIGSEGV on torch 2.2 to 2.10,
# after the program has run: a program with 60 backward calls in a loop and one NaN, under
# ``tensorscope explain``, exits 139 on 2.3.1, 2.4.1, 2.5.1, 2.6.0, 2.7.1, 2.8.0 and 2.10.0 (two runs
# each, CUDA builds from PyPI on the CPU), and cleanly on 2.11.0, 2.12.1, 2.13.0, 2.14.1 and 2.15.0.
# Turning the origin mode off alone makes 2.10.0 exit 0. The crash site moves (a dict comprehension
# while the report is built, popping the mode, ``gc.collect()``), so it is a memory corruption met
# at a later allocation. Pure torch reproduces a form of it on 2.2.2 and 2.9.1: a TorchDispatchMode
# that only calls ``func``, pushed over 50 backward calls, then popped, segfaults at the next
# ``gc.collect()``/``compile``; on 2.10.0 that loop, with or without a ``sum().item()`` of each
# output and saved-tensor hooks, runs cleanly, so the trigger there is not isolated yet.
# No feature tells the broken releases apart (the same classes and functions exist on both sides),
# and a crash cannot be probed for in the process that would crash, so this one difference is keyed
# on the release: before 2.11 no dispatch mode is pushed around backward (the opt-in whole-run origin
# mode is ignored with a note; the rerun of the one backward node that made a non-finite gradient and
# the mode inside torch.func transforms are skipped). The origin itself is read from the graph on
# every release (NOTE [Origins from the graph] in instrument/origin_walk.py). Nothing else in this
# module looks at a version number.
def _release(version: str) -> tuple[int, int]:
    major, minor = (version.split("+")[0].split(".") + ["0", "0"])[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


DISPATCH_MODE_OVER_BACKWARD_SAFE = _release(torch.__version__) >= (2, 11)


# NOTE [Python 3.10: no column positions, the caught traceback re-raised]
# Two differences of Python 3.10, found by the matrix (3.10 x 2.2.2), each handled where it bites
# and detected, not read from the version:
# - The alias a write went through (``tmp`` in ``tmp.mul_(2)``) is read from the exact source of the
#   call being executed, found with ``code.co_positions()`` (PEP 657, 3.11 and later). Where a code
#   object has no ``co_positions``, ``frames.call_segment`` matches the instruction at ``f_lasti`` to
#   the one node of the line's syntax tree it can be (instrument/bytecode_segment.py, NOTE [The
#   executing call from bytecode and the line's syntax tree]); where two nodes fit, no alias is named.
# - A bare ``raise`` re-raises the traceback its ``except`` clause caught, not the exception's
#   ``__traceback__`` (3.11 changed that), so the frame of tensorscope's wrapper that let a
#   program's exception through stayed in its traceback. ``frames.strip_for_reraise`` unlinks it in
#   the first program frame the exception reaches (NOTE [A bare raise on Python 3.10] in
#   instrument/frames.py); ``frames.RERAISE_KEEPS_CAUGHT_TRACEBACK`` is measured at import.


# NOTE [A warning above the outermost frame]
# A warning whose ``stacklevel`` goes past the outermost frame (``warnings.warn(..., stacklevel=2)`` at a
# script's top level) is shown as ``sys:1: UserWarning: ...`` on Python 3.10.13, 3.11.7 and 3.12.1 and as
# ``<sys>:0: ...`` on 3.13.0 (measured). Under tensorscope the script's frame has runner frames
# above it, and such a warning is shown where python would: the place is learnt once, from a warning
# sent past any stack (the registry python makes in ``sys`` for it is removed again).
def _above_the_stack() -> tuple:
    had = "__warningregistry__" in vars(sys)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.warn("tensorscope probe", UserWarning, stacklevel=1 << 20)
        return (caught[0].filename, caught[0].lineno) if caught else ("sys", 1)
    except Exception:
        return "sys", 1
    finally:
        if not had:
            vars(sys).pop("__warningregistry__", None)


WARNING_ABOVE_THE_STACK = _above_the_stack()


# NOTE [sys.monitoring on Python 3.12 and later]
# Python 3.12 added ``sys.monitoring`` (PEP 669): events per tool id, enabled per code object, no
# frame of the library's calls given a trace function. Where it exists, the watch of exposed
# saved bytes (instrument/watch.py) takes a tool id of its own and turns LINE/PY_RETURN events on
# for the program's code objects only; on 3.10 and 3.11 it falls back to ``sys.settrace``. A
# program's own ``sys.settrace`` and ``sys.monitoring`` tools keep working beside it (monitoring
# is per tool id; tensorscope never takes the debugger's or the profiler's id). The record of the
# program's lines that names every autograd node's forward line (instrument/lines.py, NOTE
# [Forward lines from line events]) takes a second id under every command; 3.10 and 3.11 have no
# equivalent at a cost a plain run can bear, so there the line is named only where recorded events
# bracket the node.
monitoring = getattr(sys, "monitoring", None)
