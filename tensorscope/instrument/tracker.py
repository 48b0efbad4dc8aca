"""The recorder of one run: the callbacks the wrappers and hooks call, turning live tensors into
recorded facts.

Every method here must never raise into the program: each body is guarded, and
a failure inside tensorscope only loses detail.

NOTE [One recorder, its collaborators]
``Tracker`` is the one object a run records into (``state.recorder``). It holds the recording
(``Recorder``: events, ids, storages) and the in-place writes, aliases and copies, and it owns a
collaborator per concern, each built for the run and holding the recorder it reports to:
``saved_checks`` (the saved-tensor hooks' callbacks), ``backward_calls`` (each backward and
autograd.grad), ``failure_graph`` (the failing graph read on the failure path) and ``watch`` (the
line-by-line watch of exposed saved bytes). A collaborator reads the recorder and the others
through their public names only: the backward running is ``backward_calls.current``.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict

import torch

from tensorscope.instrument import saved as saved_mod, state
from tensorscope.instrument.growth import Growth
from tensorscope.instrument.backward_calls import BackwardCalls
from tensorscope.instrument.failure_graph import FailureGraph
from tensorscope.instrument.frames import (_LINES, COMPILER, library_name, line_of, peek_locals, receiver, strip_traceback,
                                           user_frame)
from tensorscope.instrument.kept import EXTERNAL as _EXTERNAL, kept_values
from tensorscope.instrument.optimizer_steps import OptimizerSteps
from tensorscope.instrument.runningstats import CODES as _RUNNING_STATS_CODES, RunningStats
from tensorscope.instrument.sharedstate import SharedState
from tensorscope.instrument.recorder import (_ONE_AGGREGATED, Recorder, byte_range as _byte_range, count_site,
                                             inspectable, ranges_overlap, storage_key)
from tensorscope.instrument.records import MAX_LOGGED_STORAGES, MAX_WRITES_PER_STORAGE, PreWrite, write_facts
from tensorscope.instrument.saved_checks import SavedChecks
from tensorscope.instrument.watch import Watch

_Tensor = torch.Tensor
_MAX_LOGGED_STORAGES = MAX_LOGGED_STORAGES
_MAX_WRITES_PER_STORAGE = MAX_WRITES_PER_STORAGE
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_is_grad_enabled = torch.is_grad_enabled
_current_thread = threading.current_thread
_MAIN = threading.main_thread()
IN_WRITE = state.IN_WRITE  # see state.py
_PAUSED = state.PAUSED  # see NOTE [Pausing the recorder]
_get_ident = threading.get_ident


class Tracker(Recorder):
    """The recorder of one run (see NOTE [One recorder, its collaborators]): in-place writes,
    aliases, copies and errors here; the rest in the collaborators it owns."""

    active = False
    check_values = False  # fingerprints of saved tensors (see NOTE [Fingerprints of saved tensors])
    message_style = None  # saved.MessageStyle of the running torch, learnt when saved-tensor hooks go in

    def __init__(self, program_path, **kwargs):
        super().__init__(program_path, **kwargs)
        self.swaps: dict[str, dict] = {}  # tid -> the `x.data = y` that moved it to another storage
        # storage key -> its last in-place writes, as LoggedWrite (bounded; see NOTE [The shapes of a write])
        self.write_log: OrderedDict[int, list] = OrderedDict()
        self.watch = Watch(self.user)
        self.failure_graph = FailureGraph(self)
        self.backward_calls = BackwardCalls(self)
        self.saved_checks = SavedChecks(self)
        self.growth = Growth(self)  # live bytes per name at sampled step boundaries (see NOTE [Sampling growth])
        self.growth_fwd = Growth(self, "forward")  # the same at top-level module calls (NOTE [Steps without backward])
        self.values = None  # the non-finite checks (nonfinite.ValueWatch), installed by session.active
        self.kept = kept_values()  # aliases the program keeps (see NOTE [Kept values] in kept.py)
        self.shared = SharedState()  # state two objects share, ctx attributes (see NOTE [Shared state])
        self.running_stats = RunningStats()  # see NOTE [Running statistics updated twice] in runningstats.py
        self.index_checks: dict[tuple, int] = {}  # (file, line) -> index writes checked for duplicates
        self.steps = OptimizerSteps(self)  # see NOTE [An optimizer step as one write record]

    # NOTE [Pausing the recorder]
    # tensorscope's own work during a run (a sink's finite check, a growth sample, a node run once more
    # for its first non-finite op, the end-of-run snapshot) calls into torch, and must not be recorded
    # as the program's: it pauses the recorder, and the wrappers then go straight to torch. A pause is
    # the calling thread's alone: its ident in ``state.PAUSED``, counted (pauses nest), and each wrapper
    # reads that dict after ``active`` (one truth test while it is empty).
    # A pause used to switch ``active`` off for the whole process, saving the old value and writing it
    # back. A program that trains in threads checks each thread's loss in that thread, so pauses overlap:
    # thread A saved True and wrote False, thread B saved that False, A wrote back True, B wrote back
    # False, and the recorder stayed off for the rest of the run. Measured on four threads of 300
    # backward calls each: 5 runs of 5 ended with the recorder off, and a later thread's exception came
    # through a wrapper's unrecorded path with the wrapper's frame in the traceback the program printed
    # (tests/programs/threads_dataloader.py failed CI that way). Counted but still process-wide, the
    # pauses left the recorder on, but the other threads' calls during them went unrecorded: 728 of the
    # 1200 backward calls were recorded.
    # A warning torch raises on a paused thread is tensorscope's own too: the warnings hook
    # (patches.make_showwarnmsg) does not show it. explain redoes a forward op from its saved inputs to find
    # the first non-finite one (origin_walk._redo): `x.std(0)` of one row warned "degrees of freedom is <= 0"
    # a second time, at the program's backward line, where python warns once (review19).

    def switch(self, on: bool) -> None:
        """The session turns recording on (installed) or off (the program finished)."""
        self.active = on

    def pause(self) -> None:
        """Stop recording this thread's calls until the matching ``resume`` (NOTE [Pausing the recorder]).
        Each thread writes its own key only: no lock."""
        ident = _get_ident()
        _PAUSED[ident] = _PAUSED.get(ident, 0) + 1

    def resume(self) -> None:
        ident = _get_ident()
        n = _PAUSED.get(ident, 0) - 1
        if n > 0:
            _PAUSED[ident] = n
        else:
            _PAUSED.pop(ident, None)

    # --- in-place writes ----------------------------------------------------------

    # NOTE [The write fast path]
    # Every optimizer update is an in-place write, so a training loop makes tens of thousands, and
    # past the first ``per_site`` at a line each is only counted and logged (no event). Ablations on
    # Adam's steps (24 writes each; a loaded 2-core machine, benchmarks/RESULTS.md) put a write's cost
    # in three parts: binding ``p.mul_`` and entering the wrapper with the recorder off (about a fifth),
    # the wrapper's own work around the call (a tenth), and the recording itself (the rest: two version
    # reads, the storage key, autograd's sequence nr, the walk to the program's frame, the per-line
    # count, the write log). ``write_call`` is the wrapper's one call into the recorder: the reads
    # before the write, the call and the record after it in one frame, no PreWrite tuple built and
    # unpacked, and the write log's entry made from locals. Where the write needs more (a storage that
    # holds a tensor explain saved, a write recorded in detail, a kept or shared storage, BatchNorm's counter),
    # it goes the way of ``pre_write``/``post_write`` (``_record_write``), which stay the
    # reference for every other caller (``_foreach_``, DDP, ``x.data = y``).

    def write_call(self, orig, op, args, kwargs, target, frame, ident):
        """One in-place write from its wrapper (patches.make_write): read, call ``orig``, record.

        See NOTE [The write fast path]. ``ident``: the calling thread's, put in ``_IN_WRITE`` for the
        call (the re-entry guard)."""
        try:
            v0 = target._version
            try:
                key = storage_key(target)
            except Exception:  # no storage (a functorch wrapper inside vmap/grad): nothing to match
                key = None
            refs = self.pending.get(key)  # explain's saved tensors on this storage: the reference path snaps them
            if refs is not None and not any(r() is not None for r in refs):
                del self.pending[key]  # their graphs are gone (an optimizer writing the weights after backward)
                refs = None
            fast = refs is None
        except Exception:
            fast = False
        if fast:
            aseq = _get_sequence_nr()
            uf, line, detailed = self.write_site(frame)
            mates = None
            if detailed and key is not None and self._storages.get(key) is not None:
                mates = [(t, t._version) for t in self.tensors_on_storage(key)[-8:] if t is not target]
        else:  # explain's saved tensors are watched, or no version: the reference path
            pre = self.pre_write(target, frame)
        IN_WRITE.add(ident)
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            self.on_error(e, op, target, frame, "write")
            strip_traceback(e)
            raise
        finally:
            IN_WRITE.discard(ident)
        if not fast:
            self.post_write(pre, target, op, frame, args[1] if op == "copy_" and len(args) > 1 else None)
            return out
        try:
            kept = self.kept
            young = kept.young
            if young and len(young) == 1 and young[0][0]() is None:  # one young view, dead: ``settle`` would
                kept.young = young = []  # file nothing (see NOTE [Young kept values] in kept.py)
            if (young or detailed or key in kept.keys or key in self.shared.keys
                    or id(frame.f_code) in _RUNNING_STATS_CODES or key is None):
                self.write_rest(target, op, args, frame, v0, key, aseq, uf, line, detailed, mates)
                return out
            if uf is not None:
                self.log_write(key, (aseq, v0, target._version, op, _is_grad_enabled(), uf.f_code, uf.f_lasti,
                                     line, frame.f_code if frame is not uf else None, None))
            else:
                self.log_write(key, (aseq, v0, target._version, op, _is_grad_enabled(), None, None, None,
                                     frame.f_code, None))
        except Exception:
            pass
        return out

    def write_rest(self, target, op, args, frame, v0, key, aseq, uf, line, detailed, mates) -> None:
        """``write_call``'s tail after the call where the write is more than a log entry: young kept values to
        settle, a write recorded in detail, a storage with a kept alias or a shared state, BatchNorm's counter,
        no storage key. Also the compiled counted write's (NOTE [A counted write, compiled] in speedups.py)."""
        try:
            kept = self.kept
            if kept.young:  # see NOTE [Young kept values] in kept.py
                kept.settle(self)
            if (detailed or key in kept.keys or key in self.shared.keys
                    or id(frame.f_code) in _RUNNING_STATS_CODES or key is None):
                self.post_write((v0, None, mates, uf, detailed, key, aseq, line), target, op, frame,
                                args[1] if op == "copy_" and len(args) > 1 else None)
                return
            if uf is not None:
                self.log_write(key, (aseq, v0, target._version, op, _is_grad_enabled(), uf.f_code, uf.f_lasti,
                                     line, frame.f_code if frame is not uf else None, None))
            else:
                self.log_write(key, (aseq, v0, target._version, op, _is_grad_enabled(), None, None, None,
                                     frame.f_code, None))
        except Exception:
            pass

    def log_write(self, key, entry) -> None:
        """Add a LoggedWrite's fields (a plain tuple, see NOTE [The shapes of a write]) to the write log of
        storage ``key``: the last 16 writes of each of the 4,096 storages written most recently."""
        log = self.write_log
        recs = log.get(key)
        if recs is None:  # least recently written storage out first: O(1) (an OrderedDict)
            if len(log) >= _MAX_LOGGED_STORAGES:
                log.popitem(last=False)
            recs = log[key] = []
        else:
            log.move_to_end(key)
            if len(recs) >= _MAX_WRITES_PER_STORAGE:
                del recs[0]
        recs.append(entry)

    def write_site(self, frame):
        """(the program's innermost frame at or above ``frame``, its line, whether a write there is
        recorded in detail): the per-line count of writes, counted here.

        What ``user_frame``, ``line_of`` and ``allow_at`` do, without their calls, for files already
        classified and lines already seen (see NOTE [Hot path] in patches.py)."""
        verdict = self.user._verdict
        uf = frame
        while uf is not None:  # user_frame, inlined
            v = verdict.get(uf.f_code.co_filename)
            if v is True:
                break
            if v is None:  # a file not classified yet
                uf = user_frame(uf, self.user)
                break
            uf = None if v is COMPILER else uf.f_back
        if uf is None:
            return None, None, False
        code = uf.f_code
        line = _LINES.get((id(code), uf.f_lasti))  # line_of, inlined for a line seen before
        if line is None:
            line = line_of(uf)
        site = ("write", code.co_filename, line)  # allow_at, inlined
        counts = self.site_counts
        count_site(counts, (site,))  # NOTE [Site counts from several threads] in recorder.py
        n = counts[site]
        if n > self.per_site or len(self.events) >= self.max_events:
            count_site(self.aggregated_counts, _ONE_AGGREGATED)  # count_aggregated, inlined (the write path)
            if n <= self.per_site:
                self.log_full = True
            return uf, line, False
        return uf, line, True

    def pre_write(self, target, frame) -> tuple | None:
        """Before an in-place write: versions of the target, of the tensors saved on its storage,
        and (for a write recorded in detail) of its known storage-mates.

        The wrappers of single-tensor writes go through ``write_call`` (see NOTE [The write fast path]);
        this and ``post_write`` serve the others (``_foreach_``, DDP, ``x.data = y``) and the writes
        that need more than a count and a log entry.
        """
        try:
            v0 = target._version
        except Exception:
            return None
        try:
            key = storage_key(target)
        except Exception:  # no storage (a functorch wrapper inside vmap/grad): nothing to match
            key = None
        aseq = _get_sequence_nr()
        uf, line, detailed = self.write_site(frame)
        mates = None
        if detailed and key is not None and self._storages.get(key) is not None:
            mates = [(t, t._version) for t in self.tensors_on_storage(key)[-8:] if t is not target]
        snap = None
        if self.pending and key is not None:
            refs = self.pending.get(key)
            if refs:
                snap = []
                for ref in refs:
                    p = ref()
                    if p is not None:
                        snap.append((p, p.tensor._version))
        return v0, snap, mates, uf, detailed, key, aseq, line  # a PreWrite (see NOTE [The shapes of a write])

    def post_write(self, pre, target, op, frame, source=None):
        """After an in-place write: the write log, then (a write recorded in detail, or one into the
        storage of a saved tensor) the event and the saved tensors it hit."""
        if pre is None:
            return
        try:
            v0, snap, mates, uf, detailed, key, aseq, line = pre  # PreWrite's fields, in order
            v1 = target._version
            if self.kept.young:  # see NOTE [Young kept values] in kept.py
                self.kept.settle(self)
            if key in self.kept.keys:  # a storage with a kept alias: one dict lookup per write
                self.kept.on_write(self, target, op, frame, uf, key)
            if key in self.shared.keys:  # a storage two objects share, or a ctx attribute's: one lookup
                self.shared.on_write(self, target, op, frame, uf, key)
            if frame is not None and id(frame.f_code) in _RUNNING_STATS_CODES:  # BatchNorm's num_batches_tracked
                self.running_stats.on_update(self, frame, uf)
                if self.shared.keys:  # its running_mean/running_var, written in the kernel next
                    self.shared.on_running_stats(self, frame, uf)
            if key is not None:
                # The write log: every in-place write, compactly: what the hook-free failure path matches a
                # stale saved tensor against (see NOTE [Stale saved variable without hooks] in stale.py).
                # Plain values and code objects only; the source text is worked out on the failure path.
                # No byte range: views of one base share one version counter, so a write into other bytes
                # (`hs[t + 1] = ...` while `hs[t]` is saved) is the culprit as much as an overlapping one.
                # Each entry is a LoggedWrite's fields, in order (see NOTE [The shapes of a write]).
                if uf is not None:
                    self.log_write(key, (aseq, v0, v1, op, _is_grad_enabled(), uf.f_code, uf.f_lasti, line,
                                         frame.f_code if frame is not None and frame is not uf else None,
                                         self.tid(target) if detailed else None))
                    if detailed and _current_thread() is _MAIN:
                        self.mark(aseq, uf)
                else:
                    self.log_write(key, (aseq, v0, v1, op, _is_grad_enabled(), None, None, None,
                                         frame.f_code if frame is not None else None, None))
            if snap or detailed:
                self._record_write(v0, v1, snap, mates, uf, detailed, target, op, frame, source)
        except Exception:
            pass

    def post_write_same_bytes(self, pre, target, op, frame):
        """A write known to have left the bytes as they were (DDP's broadcast copying a rank's own values
        back, instrument/ddp.py): recorded, but no tensor saved on its storage counts as written."""
        if pre is not None:
            self.post_write(tuple(PreWrite._make(pre)._replace(saved=None)), target, op, frame)

    def _record_write(self, v0, v1, snap, mates, uf, detailed, target, op, frame, source):
        """A write recorded in detail, or one into the storage of a saved tensor (explain)."""
        hits = []
        if snap:
            rng = _byte_range(target)
            for p, pv in snap:
                if p.tensor._version != pv:
                    hits.append((p, True))
                elif op not in saved_mod.NO_DATA_WRITES and ranges_overlap(rng, _byte_range(p.tensor)):
                    hits.append((p, False))
        if not hits and not detailed:
            return
        loc = self.location(frame, uf)
        alias = receiver(loc["segment"], op) if loc["library"] is None else loc["segment"]
        grad_enabled = torch.is_grad_enabled()
        seq = self.seq + 1
        tid = self.note_tensor(target)
        info = write_facts(op, loc["file"], loc["line"], loc["segment"], alias, loc["library"], v0, v1,
                           grad_enabled, tid, False, seq=seq)
        for p, bumped in hits:
            self.saved_checks.saved_tid(p)
            w = dict(info, bumped=bumped)
            if bumped:
                if p.writes is None:
                    p.writes = []
                if len(p.writes) < 64:
                    p.writes.append(w)
            else:
                if p.silent is None:
                    p.silent = []
                if len(p.silent) < 64:
                    p.silent.append(w)
        if detailed:
            names = self.names_in(uf, [target]).get(id(target), []) if loc["library"] is None else []
            if not names and loc["library"] is None and alias and alias.isidentifier():
                names = [alias]
            if names:
                self.add_names(tid, names)
            also, bumped = self._also_changed(target, mates)
            extra = {"source": self.note_tensor(source)} if isinstance(source, _Tensor) and inspectable(source) else {}
            # an empty list as (), the names as a tuple: 48 bytes for one, as a list 88 (NOTE [Events as packed tuples])
            self.emit("write", uf, op=op, tensor=tid, alias=alias, names=tuple(names) if names else (),
                      version_before=v0, **extra,
                      version_after=v1, also_changed=also or (), also_bumped=bumped or (), library=loc["library"],
                      grad_enabled=grad_enabled, saved_hits=[
                          {"saved": p.tid, "bumped": b} for p, b in hits] if hits else ())

    def _also_changed(self, target, mates):
        """Ids of the other live tensors whose bytes the write touched, and those whose version moved."""
        if not mates:
            return [], []
        rng = _byte_range(target)
        also, bumped = [], []
        for other, before in mates:
            if ranges_overlap(rng, _byte_range(other)):
                tid = self.note_tensor(other)
                also.append(tid)
                if other._version != before:
                    bumped.append(tid)
        return also, bumped

    def post_data_set(self, pre, target, value, frame):
        """``x.data = y``: x now shares y's storage, without a version bump."""
        try:
            uf = user_frame(frame, self.user)
            loc = self.location(frame, uf)
            tid = self.note_tensor(target)
            src = self.note_tensor(value) if isinstance(value, _Tensor) else None
            self.swaps[tid] = {"op": "data_set", "file": loc["file"], "line": loc["line"],
                               "segment": loc["segment"], "alias": f"{receiver(loc['segment'], 'data') or ''}".strip() or None,
                               "library": loc["library"], "bumped": False, "tensor": tid, "source": src}
            pre = PreWrite._make(pre) if pre is not None else None
            if uf is not None and pre is not None and pre.detailed:
                names = self.names_in(uf, [target]).get(id(target), [])
                self.add_names(tid, names)
                self.emit("write", uf, op="data_set", tensor=tid, alias=names[0] if names else None,
                          names=names, version_before=pre.version,
                          version_after=target._version, also_changed=[], library=loc["library"],
                          source=src, grad_enabled=torch.is_grad_enabled(), saved_hits=[])
        except Exception:
            pass

    # --- aliases, copies, creation ----------------------------------------------------

    def on_alias(self, op, base, out, frame, shares_counter):
        try:
            self.kept.on_alias(self, op, base, out if isinstance(out, (list, tuple)) else (out,), frame)
            if not self.allow("alias", frame):
                return
            outs = out if isinstance(out, (list, tuple)) else (out,)
            if isinstance(base, _Tensor) and outs and isinstance(outs[0], _Tensor):
                try:
                    copied = storage_key(outs[0]) != storage_key(base)
                except Exception:
                    copied = False
                if copied:  # reshape/flatten of a non-contiguous tensor: a copy, not an alias
                    src = self.note_tensor(base)
                    tid = self.note_tensor(outs[0])
                    self.tensor_created.setdefault(tid, {
                        "file": frame.f_code.co_filename, "line": line_of(frame), "how": op, "source": src})
                    self.emit("copy", frame, op=op, tensor=tid, source=src,
                              requires_grad=bool(outs[0].requires_grad), grad_enabled=torch.is_grad_enabled())
                    return
            base_id = self.note_tensor(base) if isinstance(base, _Tensor) else None
            ids = []
            for o in outs:
                if isinstance(o, _Tensor):
                    tid = self.note_tensor(o)
                    ids.append(tid)
                    self.tensor_created.setdefault(tid, {
                        "file": frame.f_code.co_filename, "line": line_of(frame), "how": op,
                        "source": base_id, "shares_version_counter": shares_counter})
            if not ids:
                return
            extra = {}
            if op in ("detach", "data") and isinstance(base, _Tensor):
                # provenance of a missing graph: this call cut a tensor that had one
                extra["source_requires_grad"] = bool(base.requires_grad)
            self.emit("alias", frame, op=op, tensor=ids[0] if len(ids) == 1 else ids, base=base_id,
                      shares_version_counter=shares_counter, grad_enabled=torch.is_grad_enabled(), **extra)
        except Exception:
            pass

    def on_copy(self, op, source, out, frame, kind, kwargs, first=None):
        if out is source:  # a no-op "copy" returned its input itself: nothing was made
            return
        if op in ("numpy", "from_numpy") and self.check_values:
            self.saved_checks.note_numpy(op, source if op == "numpy" else out, frame)
        if op == "numpy" and isinstance(source, _Tensor):
            self.kept.on_export(self, source, out, frame)
        elif op in _EXTERNAL and isinstance(out, _Tensor) and _external(first if first is not None else source):
            self.kept.keep(self, op, out, first if first is not None else source, frame)
        try:
            if not self.allow(kind, frame):
                return
            src = self.note_tensor(source) if isinstance(source, _Tensor) else None
            if isinstance(out, _Tensor):
                tid = self.note_tensor(out)
                self.tensor_created.setdefault(tid, {
                    "file": frame.f_code.co_filename, "line": line_of(frame), "how": op, "source": src})
                data = {"op": op, "tensor": tid, "requires_grad": bool(out.requires_grad),
                        "grad_enabled": torch.is_grad_enabled()}
                if src is not None:
                    data["source"] = src
                    data["source_requires_grad"] = bool(source.requires_grad)
                elif first is not None and op in _REWRAPS:
                    # `torch.tensor([loss_a, loss_b])`: values copied out of tensors that had a graph
                    data["from_graph"] = _holds_graph(first)
                self.emit(kind, frame, **data)
            elif src is not None and op in ("item", "tolist", "numpy"):  # the value leaves autograd
                # (`x.type()` with no argument returns the type's name: nothing left autograd)
                data = {"op": op, "tensor": None, "source": src, "leaves_autograd": True,
                        "source_requires_grad": bool(source.requires_grad)}
                if op == "numpy":
                    data["shares_storage"] = True
                self.emit("copy", frame, **data)
        except Exception:
            pass

    def on_requires_grad(self, t, value, frame, how):
        try:
            uf = user_frame(frame, self.user)
            if uf is None or not self.allow("requires_grad", uf):
                return
            tid = self.note_tensor(t)
            names = self.names_in(uf, [t]).get(id(t), [])
            self.add_names(tid, names)
            self.emit("requires_grad", uf, tensor=tid, value=value, how=how, names=names,
                      library=None if uf is frame else library_name(frame))
        except Exception:
            pass

    def on_grad_mode(self, mode, action, frame):
        try:
            caller = frame
            decorated = None
            if caller.f_code.co_filename.endswith("_contextlib.py"):
                decorated = _decorated_function(caller)
                caller = caller.f_back
                decorator = True
            else:
                decorator = False
            if decorated is not None and decorated.co_filename in self.user:
                # `@torch.no_grad()` on the program's own function (a `forward` called by nn.Module
                # included): the region is that function, located at its decorator line
                site = ("grad_mode", decorated.co_filename, decorated.co_firstlineno)
                count_site(self.site_counts, (site,))  # NOTE [Site counts from several threads] in recorder.py
                n = self.site_counts[site]
                if n > self.per_site or len(self.events) >= self.max_events:
                    return
                event = self.emit_open("grad_mode", caller, mode=mode, action=action, enabled=torch.is_grad_enabled(),
                                  decorator=True, function=decorated.co_name)
                event["file"], event["line"] = decorated.co_filename, decorated.co_firstlineno
                return
            if caller is None or caller.f_code.co_filename not in self.user:
                return
            if not self.allow("grad_mode", caller):
                return
            self.emit("grad_mode", caller, mode=mode, action=action, enabled=torch.is_grad_enabled(),
                      decorator=decorator)
        except Exception:
            pass

    def on_sample(self, op, dist, out, frame):
        """A draw from a ``torch.distributions`` object (see instrument/provenance.py)."""
        try:
            if not isinstance(out, _Tensor) or not self.allow("sample", frame):
                return
            # the instance's own attributes only: reading a lazy property (`probs`) would compute it
            params = any(isinstance(v, _Tensor) and v.requires_grad for v in vars(dist).values())
            tid = self.note_tensor(out)
            self.tensor_created.setdefault(tid, {"file": frame.f_code.co_filename, "line": line_of(frame),
                                                 "how": op, "source": None})
            self.emit("sample", frame, op=op, tensor=tid, distribution=type(dist).__name__,
                      has_rsample=bool(getattr(dist, "has_rsample", False)), params_require_grad=params,
                      requires_grad=bool(out.requires_grad), grad_enabled=torch.is_grad_enabled())
        except Exception:
            pass

    # --- errors -----------------------------------------------------------------------

    def on_error(self, e, op, target, frame, where):
        try:
            if not self.new_failure(e):  # see NOTE [The last failure, not the first] in recorder.py
                return
            uf = user_frame(frame, self.user)
            loc = self.location(frame, uf)
            ctx = {"where": where, "op": op, "file": loc["file"], "line": loc["line"],
                   "segment": loc["segment"], "library": loc["library"],
                   "alias": receiver(loc["segment"], op) if loc["library"] is None else loc["segment"],
                   "exception_type": type(e).__name__, "message": str(e)[:2000],
                   "grad_enabled": torch.is_grad_enabled()}
            transforms = functorch_transforms()
            if transforms:
                ctx["transforms"] = transforms
            if isinstance(target, _Tensor):
                tid = self.note_tensor(target)
                ctx["tensor"] = tid
                try:
                    base = target._base
                    if base is not None:
                        ctx["base"] = self.note_tensor(base)
                        ctx["base_is_leaf"] = bool(base.is_leaf)
                        ctx["base_requires_grad"] = bool(base.requires_grad)
                except Exception:
                    pass
                if uf is not None:
                    ctx["names"] = self.names_in(uf, [target]).get(id(target), [])
            self.record_failure(ctx)
        except Exception:
            pass


_REWRAPS = ("tensor", "as_tensor")


def _external(value) -> bool:
    """Whether a tensor made from `value` may read its memory: a NumPy array, a buffer, a DLPack capsule."""
    return (hasattr(value, "__array_interface__") or hasattr(value, "__dlpack__")
            or isinstance(value, (memoryview, bytearray)) or type(value).__name__ == "PyCapsule")


def _holds_graph(value, budget=4096) -> bool:
    """True when `value` (a tensor, or nested lists/tuples of them) holds a tensor that requires grad.

    At most `budget` items are looked at in all: `torch.tensor(rows)` of a large nested list of
    floats must not cost a walk over every number.
    """
    stack = [value]
    while stack and budget > 0:
        v = stack.pop()
        budget -= 1
        if isinstance(v, _Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)):
            stack.extend(v[:budget])
    return False


def _decorated_function(frame):
    """The code of the function a grad-mode decorator runs (torch's ``decorate_context`` frame).

    The function is a closure variable of torch's own wrapper frame, read with ``peek_locals`` (NOTE
    [Locals of a running frame]).

    NOTE [The grad-mode decorator's frame]
    The wrapper is known by its closure, not its name: in torch/utils/_contextlib.py, 2.2 to 2.13
    name it ``decorate_context`` (``generator_context`` for a generator function), while 2.15 renames
    both wrappers' code to the context manager's name (``no_grad``, ``enable_grad``,
    ``inference_mode``: ``_set_stack_frame_name``), measured on 2.2.2, 2.6.0, 2.9.1, 2.13.0 and 2.15.0.
    On each, both wrappers close over exactly ``ctx_factory`` and ``func``, and only the generator's
    code has CO_GENERATOR set, so that flag tells them apart.
    """
    try:
        code = frame.f_code
        if ("func" not in code.co_freevars or "ctx_factory" not in code.co_freevars
                or code.co_flags & inspect.CO_GENERATOR):
            return None
        func = peek_locals(frame).get("func")
        return getattr(func, "__code__", None)
    except Exception:
        return None


def make_tracker(program_path, **kwargs) -> Tracker:
    return Tracker(program_path, **kwargs)


def functorch_transforms() -> list[str]:
    """The ``torch.func`` transforms in force, outermost first (``["vmap", "grad"]``), or [].

    NOTE [Transforms at a failure]
    An op that fails inside ``torch.vmap`` raises the same broadcast error as a plain mismatch, and
    only whether a vmap level was active tells the two apart (the ``vmap-inplace`` kind). functorch's
    interpreter stack says so while the failing op is still on the stack; ``get_interpreter_stack``
    is missing on older releases, where the innermost transform (``peek_interpreter_stack``) is read.
    """
    functorch = getattr(torch._C, "_functorch", None)
    if functorch is None:
        return []
    try:
        stack = functorch.get_interpreter_stack() if hasattr(functorch, "get_interpreter_stack") else None
        if stack is None and hasattr(functorch, "peek_interpreter_stack"):
            top = functorch.peek_interpreter_stack()
            stack = [top] if top is not None else []
        return [str(i.key()).rsplit(".", 1)[-1].lower() for i in stack or ()]
    except Exception:  # a transform stack in a state this release does not expect: no fact
        return []
