"""The optional compiled accelerator: a write wrapper's step lane in C (``tensorscope/_speedups.c``).

NOTE [The compiled lane]
Inside one of torch's optimizer steps recorded whole, each write from the step's lane (NOTE [A step's lane] in
optimizer_steps.py) costs what Python charges for a call: the wrapper's frame with ``*args, **kwargs``, the lane's
tests (a dict look-up by frame, the step's flag, the target's type, the torch-function modes) and the record (two
version reads, the index look-up, a tuple). ``_speedups.LaneWrite`` is the same body in C: the wrapper's
``__call__`` slot (NOTE [Transparent wrappers] in transparent.py) holds it instead of the Python function, it runs
the lane's tests and record in the same order with the same objects (``LANES``, ``_INSPECTABLE``, the modes' count,
the step's ``busy``, ``index``, ``writes`` and ``lib``), and hands every call that is not the lane's to the Python
body unchanged (``fallback``). What the program sees is the same: the wrapper object, its class, name, doc,
signature and binding are the Transparent ones, which do not look at the slot's type; a C call has no frame, so the
caller's frame is the interpreter's current one (what ``sys._getframe(1)`` gives in the Python body, also called
with no frame of the C object's between) and an exception of torch's op reaches the program with no frame of
tensorscope's to strip (the Python lane strips its own). The tuple recorded, the re-entry guard (``busy``, reset
when the op raises) and what a step closed meanwhile by another thread keeps (nothing) are the Python lane's; each
call holds the GIL from the look-up to the record except inside torch's op, as the Python body does between
bytecodes. The step's slots (``busy``, ``index``, ``writes``, ``lib``) are read and set in place, at the offsets of
``_Step``'s member descriptors, its own only (an object of another type is read by name; a descriptor borrowed
from another class, whose offset lies outside a ``_Step``, is not used). The step's write log
(``OptimizerSteps.log``'s loop, ``_log_writes``) is ``_speedups.log_writes``, entry by entry the same (it holds
each write and reads the list's length at each turn, as a Python loop does: the storage key and a tensor's
finalizers run Python code while it walks); what is left
there is C work either way: the storage keys (torch calls, ~600 instructions each), the OrderedDict's
``move_to_end``, ``del recs[0]`` at the cap and the entries' tuples. Measured (``benchmarks/step_instructions.py``,
small_mlp's step phase, 24 writes, 23 of them the lane's): 1,207k instructions a step on main, 1,121k with the
accelerator, 1,211k with ``TENSORSCOPE_PURE_PYTHON=1`` (benchmarks/RESULTS.md, "speedc18").

The step's own hooks call three more functions of it (``function``), each the Python one's reads in the same order
and the same result: ``step_index`` (``optimizer_steps._index``'s dict: ``group["params"]``, ``p.grad``,
``s.values()``, ``isinstance``), ``add_count`` (``recorder.add_count``'s one C call, ``counts[key] =
counts.get(key, 0) + n``) and, inside ``log_writes``, ``del recs[0]; recs.append(entry)`` at a storage's cap as
one shift of the list's items in place (the same list after; the oldest entry let go once the list is whole). The
functions take their arguments as METH_FASTCALL (``PyArg_ParseTuple`` cost ~1.8k instructions a step). Where the
type's attribute access is Python's generic one (``tp_getattro`` is ``PyObject_GenericGetAttr``, as for
``torch.Tensor``, ``nn.Parameter`` and a subclass with no ``__getattribute__``/``__getattr__``), the lane reads a
write's ``_version`` through the data descriptor that look-up finds on the type, called as
``_PyObject_GenericGetAttrWithDict`` calls it (a data descriptor wins over any instance dict): ~150 instructions
less a read, two reads a write (Python 3.10 to 3.13; on a later Python, by name). Measured (``step_instructions.py
full 50``, small_mlp's step phase): 1,071k instructions on b6fb36a, 1,045k with ``step_index``, ``add_count``, the
shift and FASTCALL, 1,038k with the ``_version`` reads (benchmarks/RESULTS.md, "speedo19").

The extension is optional: built by ``pip install .`` / ``pip install -e .`` (setup.py's
``Extension(..., optional=True)``: a failed build leaves it out) or ``python setup.py build_ext --inplace`` in a
checkout. Without it, with one built for another Python (its file name carries the ABI tag, so it is not found)
or for another version of this file (``VERSION``), or with ``TENSORSCOPE_PURE_PYTHON=1`` in the environment (read
when the wrappers are installed), the Python body runs alone. On a free-threaded build (``Py_GIL_DISABLED``,
3.13t) it is not imported at all: the module declares no ``Py_mod_gil`` slot, so importing it would switch the GIL
on for the whole process with a RuntimeWarning on the program's stderr, and its code relies on the GIL (borrowed
references from dicts other threads may change). Reports are identical either way
(tests/test_speedups.py runs programs both ways).
"""

from __future__ import annotations

import os
import sysconfig
import weakref

#: the C source's version this module speaks to (``_speedups.VERSION``)
_VERSION = 5


def _load():
    if sysconfig.get_config_var("Py_GIL_DISABLED"):  # a free-threaded build (3.13t): see the NOTE
        return None
    try:
        from tensorscope import _speedups
    except Exception:  # not built, or built for another Python
        return None
    if getattr(_speedups, "VERSION", None) != _VERSION:
        return None
    return _speedups


_SPEEDUPS = _load()


def compiled():
    """The accelerator's module, or None: not built, or ``TENSORSCOPE_PURE_PYTHON=1`` (read when the wrappers are
    made and when a run's optimizer steps begin to be recorded, so that one process can run both ways)."""
    if _SPEEDUPS is None or os.environ.get("TENSORSCOPE_PURE_PYTHON") == "1":
        return None
    return _SPEEDUPS


def lane_write(op, orig, write, lanes, inspectable, function_modes, step_type):
    """The body a write wrapper's ``__call__`` slot holds: ``write`` itself, or the compiled lane in front of it."""
    speedups = compiled()
    if speedups is None:
        return write
    try:
        return speedups.LaneWrite(op, orig, write, lanes, inspectable, function_modes, weakref.ref, step_type)
    except Exception:
        return write


# NOTE [A counted write, compiled]
# (speedw20) Past a line's first events an in-place write outside an optimizer step is only counted and logged (NOTE
# [The write fast path] in tracker.py): short_lived's ``b.mul_(2)`` cost 47.6k instructions an iteration under
# ``run`` against python's 19.4k (callgrind, benchmarks/short_lived_instructions.py), ~25k of it the Python
# wrapper, ``write_call`` and ``write_site``. ``_speedups.counted_write`` makes the write wrapper's body a
# ``CountedWrite``, a ``LaneWrite`` (the same lane, ``hits`` and ``fallback``) that first takes that case in C, with
# the Python body's objects (``state``, ``IN_STEP``, ``IN_WRITE``, ``PAUSED``, ``frames._LINES``, the recorder's
# ``pending``, ``user._verdict``, ``site_counts``, ``per_site``, ``aggregated_counts``, ``kept``, ``shared`` and
# ``write_log``) and its order: every test is made before anything changes, and a call it cannot settle as Python
# would goes to the LaneWrite's call unchanged (the lane, else the Python body, which reads it all again): a step's
# lane or step open on any thread, a paused thread, any thread inside a write, an index write (its duplicate
# check), no positional target, a type ``_INSPECTABLE`` does not map to True, an inactive recorder, a
# torch-function mode, no version or storage key, explain's saved tensors on the storage, a caller whose file is
# not known to be the program's (a library's or torch's frame: Python walks to the program's), an instruction
# whose line was not seen yet, or a line whose count is not yet past ``per_site`` (a write recorded in detail, or
# the event cap's ``log_full``). Else the site is counted, the thread's ident is in ``IN_WRITE`` while torch's op
# runs (the re-entry guard), an exception of the op goes to ``Tracker.on_error`` with tensorscope's frames
# stripped and on to the program (a C call adds no frame), and after the op one dead young view is let go as
# ``write_call`` lets it go; young views left, a kept alias or shared state on the storage, a running-statistics
# code go to ``Tracker.write_rest`` (write_call's own tail: ``settle``, ``post_write``); otherwise the write log's
# entry, the tuple ``write_call`` makes, is appended as ``Tracker.log_write`` appends it (an Exception dropped, as
# write_call's ``except Exception: pass``). Measured: the statement 47.6k -> 31.5k instructions an iteration,
# short_lived's loop 113.5k -> 100.8k (benchmarks/RESULTS.md, "speedw20"); ``tests/test_speedups.py`` compares the
# two bodies' counts, logs and reports on a program of hostile callers.


def counted_write(lane, state, in_step, in_write, paused, lines, get_seq, grad_enabled, storage_key, failed,
                  aggregated, running_codes, index_write, max_storages, max_writes):
    """A write wrapper's body with its counted writes compiled (``_speedups.counted_write``, NOTE [A counted write,
    compiled]) around the compiled lane ``lane``; ``lane`` itself where that is not a LaneWrite (the Python body,
    not built, an older build, ``TENSORSCOPE_PURE_PYTHON=1``)."""
    make = getattr(compiled(), "counted_write", None)
    if make is None or type(lane) is not getattr(compiled(), "LaneWrite", None):
        return lane
    try:
        return make(lane, state, in_step, in_write, paused, lines, get_seq, grad_enabled, storage_key, failed,
                    aggregated, running_codes, bool(index_write), max_storages, max_writes)
    except Exception:
        return lane


def log_writes():
    """``OptimizerSteps.log``'s loop in C (``_speedups.log_writes``), or None for the Python one."""
    return getattr(compiled(), "log_writes", None)


def function(name):
    """The accelerator's function ``name`` (see tensorscope/_speedups.c), or None for the Python one: not built, an
    older build without it, or ``TENSORSCOPE_PURE_PYTHON=1``."""
    return getattr(compiled(), name, None)


# NOTE [A counted line's calls, compiled]
# (speeds19) Past a line's first events an alias, a copy or a creation there is only counted (NOTE [A counted line's
# calls] in calls.py), and short_lived's loop makes three such calls an iteration (``torch.full``, ``a.clone()``,
# ``b[1:]``). The Python body of such a wrapper then costs a Python frame with ``*args, **kwargs``, the recorder's
# tests, ``sys._getframe``, the torch-function modes' count, the verdict of the caller's file, the remembered
# instruction's five tests and two counts: about 7,300 instructions a call over the wrapper with the recorder off
# (callgrind, benchmarks/short_lived_instructions.py). ``_speedups.counted_call`` makes the same body in C (the
# wrapper's ``__call__`` slot holds it, as for ``LaneWrite``): no recorder, an inactive one or a paused thread go to
# the Python body unchanged (``fallback``), which tests again and calls torch; else it calls torch itself, hands an
# exception of torch's to ``failed`` (the failure recorded as the Python ``except`` clause records it, tensorscope's
# frames stripped, the exception then going on to the program with no frame of tensorscope's: a C call has none),
# counts a remembered instruction's call in place (``site_counts`` and ``aggregated_counts`` as
# ``collections._count_elements`` counts an exact dict, under the GIL; anything else through that function), offers
# an alias to ``KeptValues.on_alias`` with the same arguments, and hands every other call to ``record``, the Python
# body's code after torch returned, so that what is recorded, remembered and counted is the Python body's. A test
# the C body cannot settle as the Python one would (a type compared by ``==``, a list or tuple result, a file not
# classified yet) goes to ``record``, never the other way. The caller's frame is the interpreter's current one, the
# one ``sys._getframe(1)`` gives in the Python body.


def counted_call(orig, fallback, record, failed, state, paused, modes, lines, op, alias, count, aggregated):
    """The compiled body of a counted wrapper (``_speedups.counted_call``), or None for the Python one (not built,
    an older build, or ``TENSORSCOPE_PURE_PYTHON=1``)."""
    make = getattr(compiled(), "counted_call", None)
    if make is None:
        return None
    try:
        return make(orig, fallback, record, failed, state, paused, modes, lines, op, bool(alias), count, aggregated)
    except Exception:
        return None


# NOTE [A storage key read in place]
# (speedc21) A storage is keyed by its StorageImpl's address (NOTE [Storage keys without storage objects] in
# recorder.py), read by ``torch._C._storage_address`` (``_storage_id`` on 2.2), a pybind function: ~775
# instructions a call, 16 a small_mlp step in the optimizer step's write log (benchmarks/RESULTS.md, "speedv20").
# ``_speedups.storage_key`` reads the same word in place: the tensor's Python object holds its TensorImpl (the
# THPVariable's ``cdata``: an ``at::Tensor`` right after the object's head on 2.3 to 2.15, a
# ``MaybeOwned<at::Tensor>`` on 2.2, whose ``isBorrowed_`` flag sits before it), and a TensorImpl holds its
# StorageImpl in ``storage_``, a member of TensorImpl itself (after its vtable and refcounts: one combined count
# on 2.13 and 2.15, two on 2.2), so at one offset in every kind of tensor. Neither offset is an API and both moved
# between releases, so neither is written down: ``setup_storage_key`` finds both at import from probe tensors
# (each offset the one word, among the few it can be, that holds ``_cdata`` and torch's key for every probe: a
# tensor, a view of another, a zero-dimensional one, an int64 one, a Parameter, one that requires grad); where
# either is not found, or a probe then reads differently from torch's key, the C read stays off and torch's
# function is called. The read is used only for a tensor whose type is exactly ``torch.Tensor`` or
# ``nn.Parameter`` (a subclass may be any kind of object torch makes), only where the TensorImpl's storage is not
# null (a sparse, mkldnn, batched (vmap) or functorch grad-wrapped tensor has none, and torch's key raises for
# it: the call goes to torch's function, which raises the same) and, on 2.2, only for an owned ``cdata`` (its
# flag word zero). tests/test_speedc21.py compares the two reads on plain, viewed, strided, zero-size, meta,
# complex, conjugate, nested, sparse, mkldnn, quantized, numpy-shared tensors, tensors inside ``vmap``,
# ``torch.func.grad`` and ``functionalize``, and after ``.data =`` and ``set_``: equal keys or the same exception
# (run on torch 2.2.2, 2.6.0, 2.9.1, 2.13.0 and 2.15.0). The compiled write log (``OptimizerSteps.log``) and the
# compiled counted write use it; the Python paths call torch's function as before. The same probes find a write's
# version: ``version_counter_`` is TensorImpl's third member after ``storage_`` on 2.2 to 2.15 (``autograd_meta_``
# and ``extra_meta_`` between; null for an inference tensor, whose ``_version`` raises), its ``version_`` two or
# three words into the counter (probed with probes of different versions). The compiled lane and counted write read
# it in place for a plain tensor with a counter while no torch-function mode is on (torch's getter asks only that
# for a plain tensor), asking the modes' count again for the read after torch's op; else torch's getter. The probes
# run once at import, unseen by any torch-function mode of the program's.
_STORAGE_KEY = None


def setup_storage_key(torch_key):
    """Find where a tensor's storage key lies (see the NOTE) and keep the compiled read where it was found."""
    mod = _SPEEDUPS
    if mod is None or not hasattr(mod, "storage_key_setup"):
        return
    try:
        import torch
        with torch._C.DisableTorchFunction():  # a program's torch-function mode (an in-process import) sees none of it
            _probe(mod, torch, torch_key)
    except Exception:
        pass


def _probe(mod, torch, torch_key):
    """``setup_storage_key``'s probes: both offsets found and checked, or the compiled reads left off."""
    global _STORAGE_KEY
    base = torch.zeros(4)
    probes = [torch.zeros(3), base, base[1:], torch.zeros(()), torch.ones(2, dtype=torch.int64),
              torch.nn.Parameter(torch.zeros(2)), torch.zeros(2, requires_grad=True)]
    if not mod.storage_key_setup(torch_key, (torch.Tensor, torch.nn.Parameter),
                                 [(t, t._cdata, torch_key(t)) for t in probes]):
        return
    key = mod.storage_key
    if not all(key(t) == torch_key(t) for t in probes):
        return
    _STORAGE_KEY = key
    # the versions: probes whose versions differ (the counter a view shares with its base included)
    with torch.no_grad():
        for t, n in ((probes[1], 1), (probes[3], 5), (probes[5], 9), (probes[6], 2)):
            for _ in range(n):
                t.add_(1)
    if mod.version_setup([(t, t._version) for t in probes]):
        if not all(mod.version_in_place(t) == t._version for t in probes):
            mod.version_setup([])  # off again: a list too short


def storage_key():
    """The compiled storage key (see the NOTE), or None: not built, not found, or ``TENSORSCOPE_PURE_PYTHON=1``."""
    if _STORAGE_KEY is None or compiled() is None:
        return None
    return _STORAGE_KEY
