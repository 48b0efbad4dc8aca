"""torch.distributed: the backend of the run, the parameter names of each DistributedDataParallel,
and the writes DDP's broadcasts make into the module's parameters and buffers.

DDP's reducer reports parameters that got no gradient by index ("Parameter indices which did
not receive grad for rank 0: 2 3"). The index is a position in the list DDP builds when it is
constructed; a wrapper around ``DistributedDataParallel.__init__`` records that list as names
(plain strings), so the explanation can name the parameters by module path. The wrapper runs once
per construction and keeps no tensor.

NOTE [DDP's broadcasts are writes]
DDP copies rank 0's tensors into every rank's module in place, in C++ (``dist._broadcast_coalesced``,
which no Tensor wrapper sees): at construction (parameters and buffers, ``_sync_module_states``) and
at the start of each forward (buffers, ``broadcast_buffers``/``forward_sync_buffers``). Measured on
torch 2.13 (gloo, CPU): the construction broadcast moves the version of every tensor it copies into,
on every rank, rank 0 included (its own values copied back) and in a one-process group too; the
forward broadcast runs under ``torch.autograd._unsafe_preserve_version_counter`` and moves none
(earlier releases bumped them there: the "DDP module called twice" version error). Wrapping
``dist._broadcast_coalesced`` records each copied-into tensor as an in-place write through the
tracker's ordinary ``pre_write``/``post_write``, so the hook-free failure path (stale.py) and
explain's saved-tensor records both see DDP as the writer, at the program's line that built or
called the model. The op names what DDP did; the library frame is DDP's own method. Where torch
keeps the versions, forward broadcasts after the first few are recorded only for buffers that share
a storage with a saved tensor (the cost stays off a model with hundreds of BatchNorm buffers).
"""

from __future__ import annotations

import functools
import os
import sys
import threading

import torch

from tensorscope.instrument.fingerprint import checksum
from tensorscope.instrument.frames import peek_locals, strip_for_reraise, user_frame
from tensorscope.instrument.recorder import inspectable, storage_key
from tensorscope.instrument.transparent import named


def install(tracker, patcher) -> None:
    """Wrap DDP construction and ``init_process_group`` for one run (the patcher undoes it)."""
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        from torch.nn.parallel import distributed as ddp_module
    except Exception:  # a build without distributed support: nothing to record
        return
    DDP = ddp_module.DistributedDataParallel
    orig_init = DDP.__init__

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        try:
            orig_init(self, *args, **kwargs)
        except BaseException as e:  # the program's traceback, as under python (see NOTE [Invisible frames])
            strip_for_reraise(e)
            raise
        try:
            _record_model(tracker, self, dist)
        except Exception:  # never disturb the program's construction
            pass

    patcher._set(DDP, "__init__", __init__)
    orig_init_pg = dist.init_process_group

    @functools.wraps(orig_init_pg)
    def init_process_group(*args, **kwargs):
        result = orig_init_pg(*args, **kwargs)
        try:
            tracker.distributed_backend = str(dist.get_backend())
        except Exception:
            pass
        return result

    patcher._set(dist, "init_process_group", init_process_group)
    orig_bc = getattr(dist, "_broadcast_coalesced", None)
    orig_sync = vars(DDP).get("_sync_buffers")
    if orig_sync is not None:
        patcher._set(DDP, "_sync_buffers", _sync_buffers_wrapper(tracker, orig_sync))
    if orig_bc is not None:
        patcher._set(dist, "_broadcast_coalesced", _broadcast_wrapper(tracker, orig_bc, _keeps_versions(orig_sync)))


# DDP's methods that broadcast, innermost first, and what the broadcast is (see NOTE [DDP's broadcasts are writes])
_SITES = (
    ("_sync_final_model", "DistributedDataParallel join: final sync of parameters and buffers"),
    ("_check_and_sync_module_buffers", "DistributedDataParallel join: broadcast_buffers"),
    ("_sync_buffers", "DistributedDataParallel broadcast_buffers"),
    ("__init__", "DistributedDataParallel construction: sync of parameters and buffers"),
)
_DDP_FILE = os.sep + os.path.join("torch", "nn", "parallel", "distributed.py")
_MAX_FRAMES = 12


def _ddp_frame(frame):
    """(DDP's frame that asked for the broadcast, what it is), or (None, None) for someone else's."""
    found = {}
    f, n = frame, 0
    while f is not None and n < _MAX_FRAMES:
        code = f.f_code
        if code.co_filename.endswith(_DDP_FILE):
            found.setdefault(code.co_name, f)
        f, n = f.f_back, n + 1
    for name, what in _SITES:
        if name in found:
            return found[name], what
    return None, None


def _module_tensors(ddp_frame, tensors):
    """The module's own parameters and buffers behind ``tensors`` (construction broadcasts detached
    aliases: the write is recorded on the tensor the program holds, which shares their version counter)."""
    ddp = peek_locals(ddp_frame).get("self") if ddp_frame.f_code.co_name == "__init__" else None
    module = getattr(ddp, "module", None)
    if module is None:
        return list(tensors)
    own = {}
    for t in list(module.parameters()) + list(module.buffers()):
        try:
            own.setdefault((t.data_ptr(), tuple(t.shape), t.dtype), t)
        except Exception:
            continue
    out = []
    for t in tensors:
        try:
            out.append(own.get((t.data_ptr(), tuple(t.shape), t.dtype), t))
        except Exception:
            out.append(t)
    return out


_TensorBase = torch._C.TensorBase
_local = threading.local()  # the writes of a `_sync_buffers` call, recorded once it has returned


def _keeps_versions(sync_buffers) -> bool:
    """Whether this torch's ``_sync_buffers`` puts the buffers' versions back after its broadcast."""
    code = getattr(sync_buffers, "__code__", None)
    return code is not None and "_unsafe_preserve_version_counter" in code.co_names


# Forward broadcasts recorded in full, for the timeline; after them, on a torch that keeps the versions,
# only buffers sharing a storage with a tensor saved for backward: the others' records could never
# matter (no version moved, nothing saved to hit), and a model with hundreds of BatchNorm buffers would
# pay for them on every forward.
_FULL_FORWARD_SYNCS = 3


def _broadcast_wrapper(tracker, orig, keeps_versions=False):
    """``dist._broadcast_coalesced`` recording, when DDP calls it, a write into each tensor it copies into."""
    syncs = [0]  # forward broadcasts seen in this run

    def _broadcast_coalesced(*args, **kwargs):
        records = None
        if tracker.active:
            try:
                frame, what = _ddp_frame(sys._getframe(1))
                if frame is not None:
                    tensors = args[1] if len(args) > 1 else kwargs.get("tensors", ())
                    src = args[3] if len(args) > 3 else kwargs.get("src", 0)
                    op = f"{what} (from rank {src})"
                    targets = [t for t in _module_tensors(frame, tensors) if inspectable(t)]
                    if keeps_versions and frame.f_code.co_name == "_sync_buffers":
                        syncs[0] += 1
                        if syncs[0] > _FULL_FORWARD_SYNCS:
                            targets = [t for t in targets if _shares_saved(tracker, t)]
                    records = [(t, tracker.pre_write(t, frame), op, frame, t._version, _fingerprint(tracker, t))
                               for t in targets]
            except Exception:  # never disturb the program's broadcast
                records = None
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        if records:
            later = getattr(_local, "later", None)
            if later is not None and records[0][3].f_code.co_name == "_sync_buffers":
                later.extend(records)  # versions read once `_sync_buffers` has restored them
            else:
                _post(tracker, records)
        return out

    return named(_broadcast_coalesced, orig)


def _shares_saved(tracker, t) -> bool:
    """Whether a tensor saved for backward (explain's records) lies on ``t``'s storage."""
    if not tracker.pending:
        return False
    try:
        return bool(tracker.pending.get(storage_key(t)))
    except Exception:
        return True


def _fingerprint(tracker, t):
    """A checksum of ``t`` when a tensor saved for backward shares its storage (explain), else None."""
    if not tracker.pending:
        return None
    try:
        if tracker.pending.get(storage_key(t)):
            return checksum(t)
    except Exception:
        pass
    return None


def _post(tracker, records) -> None:
    """Record the writes once the versions are final. A write that moved no version and changed no
    byte of a saved tensor's storage (rank 0 receives its own values; every rank once they agree)
    matches no saved tensor: explain's fingerprints would clear it, but the hazard of a real silent
    write (BatchNorm's kernel, between the same two lines) must not be pinned on DDP."""
    for t, pre, op, frame, v0, fp in records:
        try:
            same = t._version == v0 and (fp is None or not bool(_TensorBase.ne(checksum(t), fp)))
            if same:
                tracker.post_write_same_bytes(pre, t, op, frame)
            else:
                tracker.post_write(pre, t, op, frame)
        except Exception:  # a surprising tensor loses its record, never the program's forward
            continue


def _sync_buffers_wrapper(tracker, orig):
    """``DistributedDataParallel._sync_buffers``: its broadcast's writes are recorded after it returns,
    when ``_unsafe_preserve_version_counter`` (newer torch, 2.13 included) has put the versions back."""

    def _sync_buffers(*args, **kwargs):
        outer = getattr(_local, "later", None)
        records = _local.later = [] if tracker.active else None
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        finally:
            _local.later = outer
        if records:
            _post(tracker, records)
        return out

    return named(_sync_buffers, orig)


def reducer_parameter_names(module, ignore=()) -> list[str]:
    """The names of the parameters DDP reduces, in the reducer's index order.

    DDP walks ``named_modules()`` and each module's own parameters, keeps those that require
    grad and are not ignored, and drops repeats of one parameter object (weight tying).
    """
    names: list[str] = []
    seen: set[int] = set()
    for module_name, m in module.named_modules():
        for param_name, p in m.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            if not p.requires_grad or f"{module_name}.{param_name}" in ignore or full in ignore:
                continue
            if id(p) in seen:
                continue
            seen.add(id(p))
            names.append(full)
    return names


def _record_model(tracker, ddp, dist) -> None:
    frame = user_frame(sys._getframe(2), tracker.user)
    forwards = {}  # module path -> where its forward is defined, for the program's own modules
    for path, m in ddp.module.named_modules():
        code = getattr(getattr(type(m), "forward", None), "__code__", None)
        if code is not None and code.co_filename in tracker.user:
            forwards[path] = {"file": code.co_filename, "line": code.co_firstlineno,
                              "function": f"{type(m).__qualname__}.forward"}
    record = {
        "parameters": reducer_parameter_names(ddp.module, getattr(ddp, "parameters_to_ignore", ())),
        "forwards": forwards,
        "file": frame.f_code.co_filename if frame is not None else None,
        "line": frame.f_lineno if frame is not None else None,
        "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
    }
    tracker.ddp_models.append(record)
    try:
        tracker.distributed_backend = str(dist.get_backend(ddp.process_group))
    except Exception:
        pass


def backend_now(tracker) -> str | None:
    """The process group's backend: now if it is still initialised, else the one recorded during the run."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except Exception:
        pass
    return tracker.distributed_backend
