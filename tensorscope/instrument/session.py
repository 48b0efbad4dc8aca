"""Switching the instrumentation on around one program run, and off again."""

from __future__ import annotations

import ctypes
import os
import sys

from contextlib import contextmanager

import torch

from tensorscope.instrument import (ddp, device as _device, frames, nonfinite, ops as _ops, retention, saved, saving,
                                    snapshot as _snapshot, state)
from tensorscope import compat
from tensorscope.recording import (Recording, Site, Snapshot, Tensor as RecordedTensor, _in_tid_order, freeze,
                                  freeze_shared, referenced_seqs)
from tensorscope.instrument.patches import Patcher
from tensorscope.instrument.recorder import event_dict
from tensorscope.instrument.tracker import Tracker, make_tracker
from torch.utils._device import _device_constructors  # device: see active()


def new_tracker(program_path: str | None) -> Tracker:
    """A tracker for one run (the program's own files: every file outside the installation, see UserCode)."""
    return make_tracker(program_path)


class _Control:
    def __init__(self, tracker: Tracker, patcher: Patcher):
        self.tracker = tracker
        self.patcher = patcher
        self.stopped = False
        self.ops = None

    def stop(self) -> None:
        """Stop recording (the program has finished); hooks of live graphs keep working."""
        if self.stopped:
            return
        self.stopped = True
        self.tracker.steps.close_all()  # a step still open (it raised): its writes logged
        self.tracker.switch(False)
        if self.ops is not None:
            self.ops.__exit__(None, None, None)
        if self.tracker.values is not None:
            self.tracker.values.uninstall()
        if saved.hooks_on_top():
            saved.pop()
        self.patcher.uninstall()
        self.tracker.lines.uninstall()
        self.tracker.watch.reset()


@contextmanager
def active(tracker: Tracker, device: str = "auto", ops: bool = False, hooks: bool = False, frames=None,
           on_main=None):
    """Install the wrappers (and, for ``explain``, the saved-tensor hooks) for the duration of a run.

    See NOTE [Hooks only under explain] in saved.py. ``frames``: the innermost frames already running
    whose program frames get line events from now on (default: the caller's stack). ``on_main(f)``:
    runs ``f`` on the main thread, for what torch keeps per thread (the saved-tensor hooks, the
    ``--ops`` and TENSORSCOPE_ORIGIN_MODE=1 dispatch modes), when this runs on another one (NOTE [Instrumenting at the program's
    import of torch] in tensorscope/torch_import.py); None: here.
    """
    patcher = Patcher()
    state.recorder = tracker
    # --- device (tensorscope/instrument/device.py): torch caches its list of factories that honour
    # `with torch.device(...)` / set_default_device on first use; fill it before the wrappers go in,
    # or it holds the wrappers and those contexts silently stop working during the run.
    _device_constructors()
    # --- end device
    if hooks:  # before any wrapper or hook is in place: see NOTE [The version check's text ...]
        tracker.message_style = saved.learn_message_style()
        saved.learn_alone()  # see NOTE [Saved tensors no one else holds]
    patcher.install()
    if os.environ.get("TENSORSCOPE_NO_LINES") != "1":  # benchmarks/run.py's comparison mode tensorscope-no-lines
        # the frames running already (the API's caller, the program importing torch) are followed too
        tracker.lines.install(*(frames if frames is not None else [sys._getframe()]))
    ddp.install(tracker, patcher)
    saving.install(tracker, patcher)  # torch.save of a view writes its whole storage (docs/retention.md)
    if hooks:
        tracker.check_values = True  # see NOTE [Fingerprints of saved tensors]
    control = _Control(tracker, patcher)
    if device != "auto":
        _device.install(device, tracker, patcher)
    # the sinks (every command) and the origins (explain, --check-values): NOTE [Checking values at the sinks] and
    # NOTE [Origin of a non-finite value]; their reads are invisible to the program (tests/test_device.py)
    if hooks:
        # the origin is read from the graph (NOTE [Origins from the graph]); the per-op dispatch mode only on
        # request, and never where it crashes torch (NOTE [The origin mode crashes torch before 2.11])
        mode = os.environ.get("TENSORSCOPE_ORIGIN_MODE") == "1"
        if mode and not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:
            mode = False
            tracker.note(f"torch {torch.__version__}: TENSORSCOPE_ORIGIN_MODE is ignored (a dispatch mode kept on "
                         "over backward calls crashes this release; docs/compatibility.md); the origin is read "
                         "from the graph instead")
        tracker.values = nonfinite.ValueWatch(tracker, origins=True, mode=mode).install()
    else:  # a plain run: the three sinks only (NOTE [Checking values at the sinks])
        tracker.values = nonfinite.ValueWatch(tracker).install()
    if ops:
        tracker.note("--ops: one event per aten op called from the program's lines (capped per line)")

    def per_thread():  # torch keeps these per thread: the main thread's, as when installed there
        if control.stopped:  # on_main ran it after the program had ended
            return
        if hooks:
            saved.push()
            tracker.values.push_mode()  # TENSORSCOPE_ORIGIN_MODE=1's dispatch mode, when on
        if ops:
            control.ops = _ops.install(tracker).__enter__()

    if on_main is None:
        per_thread()
    else:
        on_main(per_thread)
    tracker.switch(True)
    try:
        yield control
    finally:
        control.stop()


def resolve_silent(tracker: Tracker) -> None:
    """Turn the CUDA unpack checks into hazards, once the program has finished.

    The one place tensorscope reads a value: one flag per unpack check on CUDA (did the saved
    bytes' checksum change?), read after the program, so no synchronisation happens while it runs.
    See NOTE [Fingerprints of saved tensors] in saved.py.
    """
    tracker.saved_checks.resolve_unchecked()


def release_run_state(tracker: Tracker) -> None:
    """The program has ended: free what only its running backward calls read (the write log of
    NOTE [Stale saved variable without hooks], the marks of executed lines) before the snapshot
    and the report are built on top of it (the run's peak memory). Not for a block of the API
    that may sit inside a longer recording."""
    tracker.write_log.clear()
    tracker.marks.clear()
    tracker.lines.clear()
    tracker.growth.settle()  # NOTE [Growth settled when the program ends] in growth.py
    tracker.growth_fwd.settle()
    tracker.shared.release_registries()
    frames.release_caches()
    free_memory_to_system()


# NOTE [Free memory back to the system before the report]
# Python's own allocator serves objects of up to 512 bytes from arenas it gives back whole; every
# larger block (a dict of more than a few keys, a list, a tensor's bytes, the compiler's syntax
# tree of a long file) comes from C's malloc, which keeps freed pages resident for reuse by
# later malloc calls. After a program, that is a lot of freed memory: the graphs and temporaries
# of its last steps, and the syntax tree of every module it compiled (a generated 20,000-line
# script: ~56 MB). The snapshot and the report are built mostly from small objects in new
# arenas, which cannot reuse it, so the freed pages stayed resident under the report's memory and
# the run's peak was their sum. glibc's ``malloc_trim(0)`` hands free pages back to the system
# (milliseconds; measured in benchmarks/RESULTS.md, "Long programs (flat, 2026-11-26 midday)").
# Called once the program has ended and once its recording is frozen, never while it runs (its
# timing and memory stay python's own). Elsewhere (macOS, musl) there is no such call: nothing.


def _malloc_trim():
    try:  # the symbols the process has loaded already (python links the C library): no file is opened
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except Exception:
        return None
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def free_memory_to_system() -> None:
    """Give the C heap's free pages back to the system (see NOTE [Free memory back to the system
    before the report])."""
    if _TRIM is not None:
        try:
            _TRIM(0)
        except Exception:
            pass


def snapshot(tracker: Tracker, main_globals, exc) -> dict:
    # the whole process, not this thread alone (NOTE [Pausing the recorder] in tracker.py): a thread the program
    # left running must not record into what is read now
    active_before = tracker.active
    tracker.active = False
    try:
        # the facts are read from the tensors themselves: a subclass's __torch_function__ (or a mode
        # the program left on) must not see tensorscope reading .shape, .grad, .untyped_storage()...
        with torch._C.DisableTorchFunction():
            resolve_silent(tracker)
            tracker.choose_failure(exc)  # see NOTE [The last failure, not the first] in recorder.py
            if tracker.values is not None:
                tracker.values.at_exit(exc)  # a NaN the program raised on: its origin (instrument/nonfinite.py)
            # the end-of-run walk first: NOTE [The end-of-run walk before the snapshot] in retention.py
            walked = _memory_walk(tracker, main_globals, exc)
            tracker.describe_storage = True  # the storage map's sizes: see describe()
            snap = _snapshot.take(tracker, main_globals, exc)
            snap["memory"] = _memory(tracker, walked)
            walked = None
            tracker.kept.finish(tracker, snap["named"])  # see NOTE [Kept values] in kept.py
            tracker.shared.finish(tracker)  # see NOTE [Shared state] in sharedstate.py
            tracker.running_stats.finish(tracker)
            return snap
    finally:
        tracker.describe_storage = False
        tracker.active = active_before


def _memory_walk(tracker, main_globals, exc):
    """The end-of-run walk (see NOTE [Retention walks]); None if it failed or is off."""
    if not tracker.growth.enabled:
        return None
    try:
        return retention.held_walk(tracker, main_globals, exc, tracker.growth)
    except Exception:
        return None


def _memory(tracker, walked) -> dict | None:
    """The report's ``memory`` object, once the snapshot has numbered the tensors; None if the walk failed."""
    if walked is None:
        return None
    try:
        return walked.finish(tracker)
    except Exception:
        return None


def retention_findings(tracker, memory: dict | None) -> list:
    """Raw hazard facts of memory that grew across steps, and of live views pinning a larger storage."""
    out = []
    try:
        out = tracker.growth.findings()
        fwd = tracker.growth_fwd
        if not out and tracker.growth.boundaries == 0 and fwd.samples:  # NOTE [Steps without backward]
            out = [dict(f, unit="forward") for f in fwd.findings()]
    except Exception:
        pass
    grown = {f["holder"] for f in out}  # a view already reported as growth under its holder
    seen = set()
    for v in (memory or {}).get("pinned_views") or ():
        holder = v["path"][0]["label"] if v.get("path") else None
        if holder in grown or (holder, v.get("line")) in seen:
            continue  # one finding per holder and slicing line: a list of 12 pinning slices is one mistake
        seen.add((holder, v.get("line")))
        out.append({"kind": "view-pins-storage", "retention": True, "holder": v["path"][0]["label"],
                    "where": None, "path": v["path"], "bytes_per_step": 0, "nodes_per_step": 0,
                    "bytes": v["storage_nbytes"], "nbytes": v["nbytes"], "storage_nbytes": v["storage_nbytes"],
                    "alloc": v.get("alloc"),
                    "sliced": {"file": v["file"], "line": v["line"]} if v.get("line") else None,
                    "tensor": v["tensor"], "at_end": True})
    return out


def record(tracker: Tracker, snap: dict, release: bool = False) -> Recording:
    """Freeze what the tracker recorded (and the end-of-run snapshot) into a torch-free Recording.

    Everything after instrument/ (the report, the analysis) reads this, never the tracker. One pass
    over each of the tracker's tables: linear in what was recorded. ``release``: the run is over and
    nothing reads the tracker's tables again (the command line, not a joined ``inspect()`` block), so
    each is emptied once frozen: the recording replaces them rather than adding to the peak memory.
    """
    tracker.note_caps()
    # before the hazards are frozen: a NaN at a sink adds its hazard fact (instrument/nonfinite.py)
    nonfinite = tracker.values.facts() if tracker.values is not None else None
    facts = tracker.tensor_facts
    if release:  # each record goes as its frozen tensor is made: one per-tensor table at a time, not two
        tracker.tensor_facts = {}
        tensors = [_tensor(*facts.popitem()) for _ in range(len(facts))]
        tensors.reverse()  # popitem takes the last one first
        tensors = tuple(tensors)
    else:
        tensors = tuple(_tensor(tid, f) for tid, f in facts.items())
    del facts
    if release:  # nothing below reads the id and storage tables: they go before the freezes below copy the rest
        tracker.release_tables()
    seqs: set = set()
    referenced_seqs(tracker.failure, seqs)
    referenced_seqs(tracker.saved_failure, seqs)
    node_lines = []
    for seq in sorted(seqs):  # only the nodes the failure names: node_lines holds up to 200,000
        fl = tracker.node_lines.get(seq)
        if fl is not None:
            node_lines.append((seq, fl[0], fl[1]))
    names, created = freeze(tracker.tensor_names), freeze(tracker.tensor_created)
    if release:  # each packed event goes as its dict is made (NOTE [Events as packed tuples])
        log, tracker.events = tracker.events, []
        for i, e in enumerate(log):
            log[i] = freeze(event_dict(e))
        events = tuple(log)
        log = e = None
    else:
        events = tuple(freeze(event_dict(e)) for e in tracker.events)  # NOTE [Events as packed tuples]
    if release:  # hooks of graphs still alive keep working on empty tables
        tracker.tensor_names, tracker.tensor_created = {}, {}
    sites = tuple(Site(k, f, line, n) for (k, f, line), n in tracker.site_counts.items())
    if release:  # a key tuple and a table entry for each line the program's events ran at (20,000 on a long script)
        tracker.site_counts = {}
    recording = Recording(
        tensors=tensors,
        names=names,
        created=created,
        events=events,
        sites=sites,
        aggregated=tracker.aggregated, per_site=tracker.per_site, max_events=tracker.max_events,
        failure=freeze(tracker.failure), saved_failure=freeze(tracker.saved_failure),
        hazards=freeze(tracker.hazards + retention_findings(tracker, snap.get("memory"))), backwards=freeze(tracker.backward_calls.backwards), node_lines=tuple(node_lines),
        ddp_models=freeze(tracker.ddp_models), notes=tuple(tracker.notes),
        nonfinite=freeze(nonfinite),
        snapshot=Snapshot(named=_frozen_already(snap["named"]), alive=tuple(_in_tid_order(snap["alive"])),
                          view_of=_frozen_already(snap["view_of"]), counters=_frozen_already(snap["counters"]),
                          has_grad=_frozen_already(snap["has_grad"]), roles=_frozen_already(snap.get("roles", {})),
                          optimizers=freeze(snap.get("optimizers", [])), memory=freeze_shared(snap.get("memory"))),
    )
    if release:
        free_memory_to_system()
    return recording


# NOTE [A tensor's names, one tuple from the snapshot to the row]
# The snapshot's per-tensor tables (``named``, ``view_of``, ``counters``, ``has_grad``, ``roles``: 20,000 entries
# each on a model of 5,000 parameters trained with Adam) are built by snapshot.take from tids to frozen values
# only: a tensor's names as a tuple of strings from the start, its counter, view base and role a string, its
# ``has_grad`` a bool or None. ``freeze`` copied each dict and made a tuple of each names list, the copies alive
# beside the originals while the recording was made, and the lists (~110 bytes each) alive from the snapshot on:
# the run's peak memory (benchmarks/RESULTS.md, "rss21"). A table whose values are all frozen already is taken
# as it is (nothing else holds the snapshot's dicts); any other is frozen as before. The command line's report
# rows then hold these tuples as the tensors' names where the events add no name (report.build); the JSON
# writer writes a tuple as the list it was, and the API's report keeps lists (its caller may change them).
def _frozen_already(table: dict) -> dict:
    """``freeze(table)``: ``table`` itself when its keys are strings and its values str, bool, None or tuples of
    str (what snapshot.take builds), else a frozen copy."""
    if type(table) is not dict:
        return freeze(table)
    for k, v in table.items():
        kind = type(v)
        if type(k) is not str or not (kind is str or kind is bool or v is None
                                      or kind is tuple and all(type(x) is str for x in v)):
            return freeze(table)
    return table


def _tensor(tid: str, f) -> RecordedTensor:
    """The frozen tensor of a TensorFacts record (instrument/recorder.py): its tuples are shared."""
    return RecordedTensor(
        id=tid, shape=f.shape, stride=f.stride, dtype=f.dtype, device=f.device, storage=f.storage,
        storage_offset=f.storage_offset, data_ptr=f.data_ptr, nbytes=f.nbytes, byte_range=f.byte_range,
        version=f.version, requires_grad=f.requires_grad, is_leaf=f.is_leaf, grad_fn=f.grad_fn,
        is_view=bool(f.is_view), view_of=f.view_of, storage_nbytes=f.storage_nbytes, storage_ptr=f.storage_ptr)


def distributed_info(tracker, env: dict | None) -> dict | None:
    """``distributed`` of the report: torchrun's rank, local rank and world size, and the backend."""
    if env is None:
        return None
    return {**env, "backend": ddp.backend_now(tracker)}
