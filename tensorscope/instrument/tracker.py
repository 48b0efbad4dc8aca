"""The callbacks the wrappers and hooks call: turning live tensors into recorded facts.

Every method here must never raise into the program: each body is guarded, and
a failure inside tensorscope only loses detail.
"""

from __future__ import annotations

import bisect
import linecache
import threading
import weakref

import torch

from tensorscope.instrument import links, saved as saved_mod, stale, state, watch
from tensorscope.instrument.saved import _quiet as _no_python_dispatch
from tensorscope.instrument.frames import call_segment, library_name, receiver, user_frame
from tensorscope.instrument.recorder import Recorder, inspectable, node_name, ranges_overlap

_Tensor = torch.Tensor
_current_node = torch._C._current_autograd_node
_MAX_NODE_LINES = 200_000
_MAX_BACKWARDS = 256
_MAX_WALK = 20_000
_MAX_LOGGED_STORAGES = 4096  # with 16 writes each: a few MB at most
_MAX_WRITES_PER_STORAGE = 16
_MAX_UNCHECKED = 200_000  # CUDA unpack checks waiting for the end of the program (a few bytes each)
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_TensorBase = torch._C.TensorBase
_current_thread = threading.current_thread
_MAIN = threading.main_thread()


def _byte_range(t):
    try:
        itemsize = t.element_size()
        start = t.storage_offset() * itemsize
        if t.numel() == 0:
            return [start, start]
        extent = (sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1) * itemsize
        return [start, start + extent]
    except Exception:
        return None


class Tracker(Recorder):
    """A Recorder with the callbacks of the wrappers (patches.py) and hooks (saved.py)."""

    active = False
    check_values = False  # fingerprints of saved tensors (see NOTE [Fingerprints of saved tensors])

    def __init__(self, program_path, **kwargs):
        super().__init__(program_path, **kwargs)
        self.numpy_shared: dict[int, dict] = {}  # storage key -> the `.numpy()`/`from_numpy` sharing it
        self.unchecked: list = []  # CUDA: (device flag, hazard facts) read once the program has ended
        self.backwards: list[dict] = []  # earlier backward calls (bounded), for backward-twice
        self.swaps: dict[str, dict] = {}  # tid -> the `x.data = y` that moved it to another storage
        self.write_log: dict[int, list] = {}  # storage key -> compact in-place writes (bounded)

    # --- in-place writes ----------------------------------------------------------

    def pre_write(self, target, frame):
        """Before an in-place write: versions of the target, of the tensors saved on its storage,
        and (for a write recorded in detail) of its known storage-mates."""
        try:
            v0 = target._version
        except Exception:
            return None
        try:
            key = target.untyped_storage()._cdata
        except Exception:  # no storage (a functorch wrapper inside vmap/grad): nothing to match
            key = None
        aseq = _get_sequence_nr()
        uf = user_frame(frame, self.user)
        detailed = uf is not None and self.allow("write", uf)
        snap = mates = None
        if detailed and key is not None:
            entry = self._storages.get(key)
            if entry is not None:
                mates = [(t, t._version) for t in self.tensors_on_storage(key)[-8:] if t is not target]
        refs = self.pending.get(key) if self.pending and key is not None else None
        if refs:
            snap = []
            for ref in refs:
                p = ref()
                if p is not None:
                    snap.append((p, p.tensor._version))
        return (v0, snap, mates, uf, detailed, key, aseq)

    def post_write(self, pre, target, op, frame, source=None):
        if pre is None:
            return
        try:
            self._post_write(pre, target, op, frame, source=source)
        except Exception:
            pass

    def _post_write(self, pre, target, op, frame, data_set_value=None, source=None):
        v0, snap, mates, uf, detailed, key, aseq = pre
        v1 = target._version
        if key is not None:
            self._log_write(key, target, op, frame, uf, v0, v1, aseq, detailed)
        hits = []
        if snap:
            rng = _byte_range(target)
            for p, pv in snap:
                if p.tensor._version != pv:
                    hits.append((p, True))
                elif data_set_value is None and op not in saved_mod.NO_DATA_WRITES and ranges_overlap(rng, _byte_range(p.tensor)):
                    hits.append((p, False))
        if not hits and not detailed:
            return
        loc = self._loc(frame, uf)
        alias = receiver(loc["segment"], op) if loc["library"] is None else loc["segment"]
        info = {"op": op, "file": loc["file"], "line": loc["line"], "segment": loc["segment"],
                "alias": alias, "library": loc["library"], "version_before": v0, "version_after": v1,
                "grad_enabled": torch.is_grad_enabled(), "seq": self.seq + 1}
        tid = self.note_tensor(target)
        info["tensor"] = tid
        for p, bumped in hits:
            self.saved_tid(p)
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
                self._add_names(tid, names)
            also, bumped = self._also_changed(target, mates)
            extra = {"source": self.note_tensor(source)} if isinstance(source, _Tensor) and inspectable(source) else {}
            self.emit("write", uf, op=op, tensor=tid, alias=alias, names=names, version_before=v0, **extra,
                      version_after=v1, also_changed=also, also_bumped=bumped, library=loc["library"],
                      grad_enabled=info["grad_enabled"], saved_hits=[
                          {"saved": p.tid, "bumped": b} for p, b in hits])

    def _log_write(self, key, target, op, frame, uf, v0, v1, aseq, detailed):
        """Every in-place write, compactly: what the hook-free failure path matches a stale saved
        tensor against (see NOTE [Stale saved variable without hooks] in stale.py). Plain values
        and code objects only; the source text is worked out on the failure path."""
        log = self.write_log
        recs = log.pop(key, None)
        if recs is None:
            recs = []
            if len(log) >= _MAX_LOGGED_STORAGES:
                del log[next(iter(log))]
        elif len(recs) >= _MAX_WRITES_PER_STORAGE:
            del recs[0]
        log[key] = recs
        # no byte range: views of one base share one version counter, so a write into other bytes
        # (`hs[t + 1] = ...` while `hs[t]` is saved) is the culprit as much as an overlapping one
        recs.append((aseq, v0, v1, op, torch.is_grad_enabled(),
                     uf.f_code if uf is not None else None, uf.f_lasti if uf is not None else None,
                     uf.f_lineno if uf is not None else None,
                     frame.f_code if frame is not None and frame is not uf else None,
                     self.tid(target) if detailed else None))
        if detailed and _current_thread() is _MAIN:
            self.mark(aseq, uf)

    def node_line(self, seq):
        """(file, line) of the forward line that built node ``seq``: exact where a pack hook saw it
        (explain); else when the events recorded just before and just after the node was built ran
        in one execution of one line (same frame, same line, later instruction: not the same line
        in the next iteration of a loop); else (None, None)."""
        known = self.node_lines.get(seq)
        if known is not None:
            return known
        marks = self.marks
        i = bisect.bisect_right(marks, seq, key=lambda m: m[0])
        if 0 < i < len(marks):
            before, after = marks[i - 1], marks[i]
            if before[1:4] == after[1:4] and before[4] < after[4]:
                return after[1], after[2]
        return None, None

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
            loc = self._loc(frame, uf)
            tid = self.note_tensor(target)
            src = self.note_tensor(value) if isinstance(value, _Tensor) else None
            self.swaps[tid] = {"op": "data_set", "file": loc["file"], "line": loc["line"],
                               "segment": loc["segment"], "alias": f"{receiver(loc['segment'], 'data') or ''}".strip() or None,
                               "library": loc["library"], "bumped": False, "tensor": tid, "source": src}
            if uf is not None and pre is not None and pre[4]:
                names = self.names_in(uf, [target]).get(id(target), [])
                self._add_names(tid, names)
                self.emit("write", uf, op="data_set", tensor=tid, alias=names[0] if names else None,
                          names=names, version_before=pre[0] if pre else None,
                          version_after=target._version, also_changed=[], library=loc["library"],
                          source=src, grad_enabled=torch.is_grad_enabled(), saved_hits=[])
        except Exception:
            pass

    # --- aliases, copies, creation ----------------------------------------------------

    def on_alias(self, op, base, out, frame, shares_counter):
        try:
            if not self.allow("alias", frame):
                return
            outs = out if isinstance(out, (list, tuple)) else (out,)
            if isinstance(base, _Tensor) and outs and isinstance(outs[0], _Tensor):
                try:
                    copied = outs[0].untyped_storage()._cdata != base.untyped_storage()._cdata
                except Exception:
                    copied = False
                if copied:  # reshape/flatten of a non-contiguous tensor: a copy, not an alias
                    src = self.note_tensor(base)
                    tid = self.note_tensor(outs[0])
                    self.tensor_created.setdefault(tid, {
                        "file": frame.f_code.co_filename, "line": frame.f_lineno, "how": op, "source": src})
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
                        "file": frame.f_code.co_filename, "line": frame.f_lineno, "how": op,
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
            self._note_numpy(op, source if op == "numpy" else out, frame)
        try:
            if not self.allow(kind, frame):
                return
            src = self.note_tensor(source) if isinstance(source, _Tensor) else None
            if isinstance(out, _Tensor):
                tid = self.note_tensor(out)
                self.tensor_created.setdefault(tid, {
                    "file": frame.f_code.co_filename, "line": frame.f_lineno, "how": op, "source": src})
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
            self._add_names(tid, names)
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
                n = self.site_counts.get(site, 0) + 1
                self.site_counts[site] = n
                if n > self.per_site or len(self.events) >= self.max_events:
                    return
                event = self.emit("grad_mode", caller, mode=mode, action=action, enabled=torch.is_grad_enabled(),
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
            self.tensor_created.setdefault(tid, {"file": frame.f_code.co_filename, "line": frame.f_lineno,
                                                 "how": op, "source": None})
            self.emit("sample", frame, op=op, tensor=tid, distribution=type(dist).__name__,
                      has_rsample=bool(getattr(dist, "has_rsample", False)), params_require_grad=params,
                      requires_grad=bool(out.requires_grad), grad_enabled=torch.is_grad_enabled())
        except Exception:
            pass

    # --- errors -----------------------------------------------------------------------

    def on_error(self, e, op, target, frame, where):
        try:
            if self.failure is not None:
                return
            uf = user_frame(frame, self.user)
            loc = self._loc(frame, uf)
            ctx = {"where": where, "op": op, "file": loc["file"], "line": loc["line"],
                   "segment": loc["segment"], "library": loc["library"],
                   "alias": receiver(loc["segment"], op) if loc["library"] is None else loc["segment"],
                   "exception_type": type(e).__name__, "message": str(e)[:2000],
                   "grad_enabled": torch.is_grad_enabled()}
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
            self.failure = ctx
        except Exception:
            pass

    # --- saved tensors ----------------------------------------------------------------

    def on_pack(self, p, t, frame):
        """Remember a saved tensor: the forward line, and its storage for the write checks.

        On the hot path (every tensor autograd saves): no tensor id, no byte range, no
        per-save closure; dead entries of ``pending`` are swept in batches.
        """
        uf = user_frame(frame, self.user)
        if uf is not None:
            p.file = uf.f_code.co_filename
            p.line = uf.f_lineno
        elif self._current_backward is not None:
            # saved during backward (create_graph), maybe on an autograd worker thread (CUDA):
            # no user frame there; the user's line is the backward() call
            p.file = self._current_backward["file"]
            p.line = self._current_backward["line"]
        key = t.untyped_storage()._cdata
        p.storage_key = key
        p.orig = weakref.ref(t)
        if p.seq_nr is not None and p.line is not None:
            self.node_lines[p.seq_nr] = (p.file, p.line)
        refs = self.pending.get(key)
        if refs is None:
            self.pending[key] = [weakref.ref(p)]
        else:
            refs.append(weakref.ref(p))
        self._packs += 1
        if self._packs >= self._next_sweep:
            self._sweep()
        if uf is not None and self.allow("saved", uf):
            p.tid = self.note_tensor(t)
            self.emit("saved", uf, tensor=p.tid, version=p.version, output=p.is_output)

    _packs = 0
    _next_sweep = 4096

    def _sweep(self):
        """Drop saved-tensor records whose graph is gone; bound node_lines."""
        pending = self.pending
        for key in list(pending):
            alive = [r for r in pending[key] if r() is not None]
            if alive:
                pending[key] = alive
            else:
                del pending[key]
        lines = self.node_lines
        while len(lines) > _MAX_NODE_LINES:
            lines.popitem(last=False)
        self._next_sweep = self._packs + max(4096, 2 * sum(len(v) for v in pending.values()))

    def saved_tid(self, p):
        if p.tid is None:
            t = p.orig() if p.orig is not None else None
            if t is not None:
                p.tid = self.note_tensor(t)
        return p.tid

    def on_stale_unpack(self, p):
        if self.saved_failure is not None:
            return
        node = _current_node()
        self.saved_tid(p)
        facts = {
            "tensor": p.tid, "version_at_save": p.version, "version_now": p.tensor._version,
            "saved_file": p.file, "saved_line": p.line, "node": node_name(node) if node is not None else None,
            "output_node": p.node, "is_output": p.is_output,
            "writes": list(p.writes or []), "silent": list(p.silent or []),
        }
        try:
            facts["names"] = self.tensor_names.get(p.tid, [])
        except Exception:
            pass
        self.saved_failure = facts

    def _note_numpy(self, op, t, frame):
        """A NumPy array and a tensor now share memory: NumPy's writes bump no version counter."""
        try:
            key = t.untyped_storage()._cdata
            names = self.names_in(frame, [t]).get(id(t), []) if op == "numpy" else []
            seg = call_segment(frame)
            log = self.numpy_shared
            if key not in log and len(log) >= _MAX_LOGGED_STORAGES:
                del log[next(iter(log))]
            log[key] = {"op": op, "file": frame.f_code.co_filename, "line": frame.f_lineno, "segment": seg,
                        "alias": seg, "library": None, "bumped": False, "tensor": self.note_tensor(t),
                        "names": names}
            watch.on_shared(self.pending.get(key))
        except Exception:
            pass

    def on_unpack_check_silent(self, p):
        """Backward unpacks a saved tensor whose version did not move: are its bytes the saved ones?

        See NOTE [Fingerprints of saved tensors]. A recorded `.data` write that was undone before
        backward (gradcheck) leaves the checksum unchanged: no hazard.
        """
        changed = None  # True/False, a 0-dim bool on the device (CUDA), or None: no fingerprint
        if p.fingerprint is not None:
            try:
                flag = _TensorBase.ne(saved_mod.checksum(p.tensor), p.fingerprint)
                changed = bool(flag) if flag.device.type == "cpu" else flag
            except Exception:
                changed = None
        swap = None
        if not p.is_output and p.storage_key is not None:
            try:
                if p.tensor.untyped_storage()._cdata != p.storage_key:
                    swap = self.swaps.get(p.tid) or {}
            except Exception:
                pass
        if changed is False or changed is None and not p.silent and swap is None:
            return
        node = _current_node()
        if changed is not None and _running_stat_in_training(node, p):
            return
        facts = {
            "tensor": None, "version_at_save": p.version, "version_now": p.tensor._version,
            "saved_file": p.file, "saved_line": p.line, "node": node_name(node) if node is not None else None,
            "writes": list(p.silent or []) + ([swap] if swap else []), "backward": self._current_backward,
            "changed_at": p.changed_at,
        }
        if changed is None or changed is True:
            facts["tensor"] = self.saved_tid(p)
            if not facts["writes"]:
                facts["writes"] = self._unseen_writer(p, node)
            self.add_hazard((facts["tensor"], p.seq_nr), facts)
        elif len(self.unchecked) < _MAX_UNCHECKED:
            # CUDA: nothing is read now; the graph walk for a custom Function is skipped here
            if not facts["writes"]:
                shared = self.numpy_shared.get(p.storage_key)
                facts["writes"] = [dict(shared)] if shared is not None else []
            self.unchecked.append((changed, p.tid, p.orig, p.seq_nr, facts))

    def resolve_unchecked(self):
        """After the program has ended: the CUDA unpack checks whose bytes had changed become hazards."""
        pending, self.unchecked = self.unchecked, []
        for flag, tid, orig, seq, facts in pending:
            try:
                if not bool(flag):
                    continue
                t = orig() if orig is not None else None
                facts["tensor"] = tid if tid is not None else (self.note_tensor(t) if t is not None else None)
                self.add_hazard((facts["tensor"], seq), facts)
            except Exception:
                continue

    def _unseen_writer(self, p, node):
        """Who wrote without any wrapper seeing it: a NumPy array sharing the memory, or a custom
        autograd.Function that took the saved tensor as input; else nothing (the window is
        explained from the save and backward lines)."""
        shared = self.numpy_shared.get(p.storage_key)
        if shared is not None:
            return [dict(shared)]
        fn = self._custom_function_on(node)
        return [fn] if fn is not None else []

    def _custom_function_on(self, node):
        """The custom autograd.Function whose node consumes ``node``'s output in the graph being
        run: its forward wrote its input without ``ctx.mark_dirty`` (walk bounded by _MAX_WALK)."""
        roots = self._backward_roots
        if node is None or not roots:
            return None
        try:
            target = node._sequence_nr()
            stack = [r.grad_fn for r in roots if r.grad_fn is not None]
            seen = set()
            n = 0
            while stack and n < _MAX_WALK:
                cur = stack.pop()
                n += 1
                seq = cur._sequence_nr()
                if seq in seen:
                    continue
                seen.add(seq)
                cls = getattr(cur, "_forward_cls", None)
                for nxt, _ in cur.next_functions:
                    if nxt is None:
                        continue
                    if cls is not None and nxt._sequence_nr() == target and not hasattr(nxt, "variable"):
                        fwd = getattr(cls.forward, "__code__", None)
                        file, line = self.node_line(seq)
                        return {"op": "custom_function", "function": cls.__name__,
                                "file": fwd.co_filename if fwd else file, "line": _def_line(fwd) if fwd else line,
                                "applied_file": file, "applied_line": line, "segment": None,
                                "alias": f"{cls.__name__}.forward", "library": None, "bumped": False}
                    stack.append(nxt)
        except Exception:
            return None
        return None

    # --- backward -----------------------------------------------------------------------

    _current_backward = None
    _backward_roots = None

    def before_backward(self, op, args, kwargs, frame):
        try:
            uf = user_frame(frame, self.user)
            loc = self._loc(frame, uf)
            roots = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
            if isinstance(roots, _Tensor):
                roots = [roots]
            roots = [r for r in (roots or []) if isinstance(r, _Tensor)]
            if roots and not inspectable(roots[0]):
                return None
            retain = kwargs.get("retain_graph")
            create = kwargs.get("create_graph", False)
            if op == "backward" and len(args) > 2:
                retain = args[2]
            if op == "backward" and len(args) > 3:
                create = args[3]
            if op == "grad" and len(args) > 3:
                retain = args[3]
            if retain is None:
                retain = bool(create)
            seq_now = torch._C._autograd._get_sequence_nr()
            ctx = {"op": op, "file": loc["file"], "line": loc["line"], "segment": loc["segment"],
                   "retain_graph": bool(retain), "seq_now": seq_now, "roots": [], "event": None,
                   "library": loc["library"]}
            root_facts = []
            detailed = uf is not None and self.allow("backward", uf)
            for r in roots:
                # the full description only for recorded calls: a training loop calls this every step
                f = {"tensor": self.note_tensor(r) if detailed else self.tid(r), "requires_grad": bool(r.requires_grad),
                     "grad_fn": node_name(r.grad_fn) if r.grad_fn is not None else None,
                     "dtype": str(r.dtype).replace("torch.", ""), "shape": list(r.shape),
                     "is_leaf": bool(r.is_leaf)}
                root_facts.append(f)
            ctx["roots"] = root_facts
            if detailed:
                names = self.names_in(uf, roots)
                receiver_name = receiver(loc["segment"], "backward") if loc["library"] is None else None
                for r, f in zip(roots, root_facts):
                    f["names"] = names.get(id(r), [])
                    if not f["names"] and receiver_name and receiver_name.isidentifier() and len(roots) == 1:
                        f["names"] = [receiver_name]
                    self._add_names(f["tensor"], f["names"])
            leaves = []
            if detailed:
                leaves = self._leaves(roots)
                ctx["event"] = self.emit("backward", uf, op=op, roots=[f["tensor"] for f in root_facts],
                                         retain_graph=bool(retain), create_graph=bool(create),
                                         leaves_with_grad=[], ok=None)
            ctx["leaves"] = leaves
            # kept only while this backward runs: the failure path may need the graph (see _freed_facts)
            ctx["_roots"] = roots
            ctx["_frame"] = uf
            self._backward_roots = roots if self.check_values else None
            self._current_backward = {"file": loc["file"], "line": loc["line"], "segment": loc["segment"]}
            return ctx
        except Exception:
            return None

    def _leaves(self, roots):
        """Ids of the leaf tensors a backward from `roots` accumulates into (AccumulateGrad nodes)."""
        out = []
        seen = set()
        stack = [r.grad_fn for r in roots if r.grad_fn is not None]
        # each node once: a graph with residual connections reaches a node along many paths. The
        # wrappers are kept (the dict's values) so that no id is reused by another node during the walk.
        visited = {id(node): node for node in stack}
        n = 0
        while stack and n < _MAX_WALK:
            node = stack.pop()
            n += 1
            try:
                for nxt, _ in node.next_functions:
                    if nxt is None or id(nxt) in visited:
                        continue
                    visited[id(nxt)] = nxt
                    if hasattr(nxt, "variable"):
                        v = nxt.variable
                        k = id(v)
                        if k not in seen:
                            seen.add(k)
                            out.append(v)
                    else:
                        stack.append(nxt)
            except Exception:
                continue
        return out

    def after_backward(self, ctx, error):
        if ctx is None:
            return
        try:
            self._current_backward = None
            self._backward_roots = None
            record = {"file": ctx["file"], "line": ctx["line"], "segment": ctx["segment"],
                      "retain_graph": ctx["retain_graph"], "seq_now": ctx["seq_now"], "ok": error is None,
                      "roots": ctx["roots"], "op": ctx["op"]}
            self.backwards.append(record)
            if len(self.backwards) > _MAX_BACKWARDS:
                del self.backwards[0]
            event = ctx["event"]
            if event is not None:
                event["ok"] = error is None
                got = []
                for v in ctx["leaves"]:
                    try:
                        if v.grad is not None:
                            tid = self.note_tensor(v)
                            got.append(tid)
                    except Exception:
                        pass
                event["leaves_with_grad"] = got
            ctx["leaves"] = None
            roots, uf = ctx.pop("_roots", None), ctx.pop("_frame", None)
            if error is not None and self.failure is None:
                for r in roots or []:
                    self.note_tensor(r)
                failure = {"where": "backward", "op": ctx["op"], "file": ctx["file"], "line": ctx["line"],
                           "segment": ctx["segment"], "exception_type": type(error).__name__,
                           "message": str(error)[:2000], "roots": ctx["roots"],
                           "saved": self.saved_failure, "library": ctx["library"],
                           "backwards_before": self.backwards[:-1][-32:]}
                self.failure = failure
                if _is_freed_error(failure["message"]):
                    failure["graph"] = self._freed_facts(roots or [], uf, failure["backwards_before"])
                    failure["links"] = links.find(roots or [], failure["backwards_before"], self.node_line)
                    for n in (failure["graph"] or {}).get("freed", []):
                        if n["seq"] not in self.node_lines:
                            file, line = self.node_line(n["seq"])
                            if line is not None:
                                self.node_lines[n["seq"]] = (file, line)
                elif stale.is_version_error(failure["message"]):
                    saved, graph = self._stale_facts(roots or [], str(error))
                    if failure["saved"] is None and saved is not None:
                        failure["saved"] = self.saved_failure = saved
                    failure["autograd_graph"] = graph
        except Exception:
            pass

    # --- the version-error failure path without hooks (see NOTE [Stale saved variable without hooks])

    def _stale_facts(self, roots, message):
        """(saved-failure facts, plain graph) of a backward that raised the version error."""
        nodes, truncated = stale.walk(roots, message)
        pick = stale.choose_stale(nodes, message)
        facts = None
        if pick is not None:
            seq, entry = pick
            now, expected = stale.versions(entry["error"])
            t = stale.stale_tensor(entry, message)
            tf = stale.tensor_facts(t) if t is not None else None
            tid = self._saved_tid(t, tf, seq)
            if self.saved_failure is not None:
                tid = self.saved_failure.get("tensor") or tid
            file, line = self.node_line(seq)
            facts = {"tensor": tid, "version_at_save": expected, "version_now": now,
                     "saved_file": file, "saved_line": line, "node": nodes[seq]["name"],
                     "writes": self._writes_on(tf, seq, expected, now) if tf else [], "silent": [],
                     "names": self.tensor_names.get(tid, []) if tid else [], "from": "graph"}
        return facts, self._graph(nodes, pick, truncated, roots, facts)

    def _known_tid(self, t):
        entry = self._ids.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def _saved_tid(self, t, tf, seq, own=True):
        """The program's own tensor behind a saved variable: the saved input itself, or the tensor
        on the same bytes whose grad_fn is the saving node (a saved output). ``own``: ``t`` came
        from ``_raw_saved_x.data`` (an input is then the program's tensor itself)."""
        if t is None or tf is None:
            return None
        known = self._known_tid(t)
        if known is not None:
            return known
        key, rng, _ = tf
        same = []
        for other in self.tensors_on_storage(key):
            if _byte_range(other) == rng:
                same.append(other)
        for other in same:
            try:
                gf = other.grad_fn
                if gf is not None and gf._sequence_nr() == seq:
                    return self.note_tensor(other)
            except Exception:
                continue
        if own and t.requires_grad:
            return self.note_tensor(t)  # an input is saved as the tensor itself
        return self.note_tensor(same[-1]) if same else None

    def _writes_on(self, tf, seq, expected, now):
        """The logged writes into the saved tensor's storage after node ``seq`` was built, that moved
        the version on from ``expected`` (the culprit is the one whose version_before is ``expected``)."""
        key = tf[0]
        out = []
        for aseq, v0, v1, op, grad_enabled, code, lasti, line, lib_code, tid in self.write_log.get(key, []):
            if aseq <= seq or v1 == v0:
                continue
            if expected is not None and v0 < expected or now is not None and v0 >= now:
                continue
            segment = call_segment(_Where(code, lasti)) if code is not None else None
            library = library_name(_Where(lib_code, 0)) if lib_code is not None else None
            out.append({"op": op, "file": code.co_filename if code is not None else None, "line": line,
                        "segment": segment, "alias": receiver(segment, op) if library is None else segment,
                        "library": library, "version_before": v0, "version_after": v1,
                        "grad_enabled": grad_enabled, "tensor": tid, "bumped": True})
            if len(out) >= 64:
                break
        return out

    def _graph(self, nodes, pick, truncated, roots, facts):
        """Plain data for the report: up to ~200 nodes nearest the stale one (diagnosis.graph)."""
        if not nodes:
            return None
        start = pick[0] if pick is not None else next(iter(nodes))
        keep = sorted(stale.nearest(nodes, start), reverse=True)
        ids = {seq: f"n{i + 1}" for i, seq in enumerate(keep)}
        _, expected = stale.versions((pick[1]["error"] if pick else "") or "")
        out = []
        for seq in keep:
            n = nodes[seq]
            file, line = self.node_line(seq)
            nxt = []
            for m in n["next"]:
                try:
                    i = ids.get(m._sequence_nr())
                except Exception:
                    i = None
                if i is not None and i not in nxt:
                    nxt.append(i)
            out.append({"id": ids[seq], "name": n["name"], "seq_nr": seq, "next": nxt, "file": file,
                        "line": line, "saved": self._graph_saved(n, pick is not None and pick[1] in n["saved"],
                                                                 pick, expected, seq, facts)})
        root = None
        for r in roots:
            try:
                root = ids.get(r.grad_fn._sequence_nr())
            except Exception:
                root = None
            if root:
                break
        return {"nodes": out, "root": root, "truncated": bool(truncated or len(nodes) > len(keep))}

    def _graph_saved(self, n, has_stale, pick, expected, seq, facts):
        out = []
        for e in n["saved"]:
            if e["stale"]:
                is_pick = has_stale and e is pick[1]
                now, exp = stale.versions(e["error"])
                t = stale.stale_tensor(e, e["error"])
                tf = stale.tensor_facts(t) if t is not None else None
                tid = facts.get("tensor") if is_pick and facts else self._saved_tid(t, tf, seq)
                out.append({"name": e["name"], "tensor": tid, "storage": self._sid(tf, tid),
                            "version_now": now, "version_at_save": exp, "stale": True})
                continue
            values = [stale._raw_tensor(r) for r in e["raws"]]
            own = any(v is not None for v in values)
            if not own:  # under explain's hooks the raw data is gone: the unpacked values
                values = e["value"] if isinstance(e["value"], (list, tuple)) else [e["value"]]
            for i, v in enumerate(values):
                if not isinstance(v, _Tensor):
                    continue
                tf = stale.tensor_facts(v)
                name = e["name"] if len(values) == 1 else f"{e['name']}[{i}]"
                tid = self._saved_tid(v, tf, seq, own) if tf else None
                version = tf[2] if tf else None
                out.append({"name": name, "tensor": tid, "storage": self._sid(tf, tid),
                            "version_now": version, "version_at_save": version, "stale": False})
            if len(out) >= 32:
                break
        return out

    def _sid(self, tf, tid):
        if tid is not None:
            return (self.tensor_facts.get(tid) or {}).get("storage")
        if tf is None or not self.tensors_on_storage(tf[0]):
            return None
        return self._storages[tf[0]][0]

    def _freed_facts(self, roots, uf, earlier):
        """Failure path of a backward through a freed graph: which nodes of it were freed, and which
        of the calling frame's tensors lead into them (e.g. a hidden state carried across iterations)."""
        prev = state.recorder
        state.recorder = None  # probing unpacks live saved tensors: keep our hooks' bookkeeping out of it
        try:
            nodes = {}
            budget = [_MAX_WALK]
            _walk([r.grad_fn for r in roots if r.grad_fn is not None], nodes, budget, probe=True)
            freed = sorted((s for s, n in nodes.items() if n["freed"]), reverse=True)
            freed_set = set(freed)
            # which earlier backward (index into `earlier`) went through each freed node, when its roots live on
            freed_by = {}
            earlier_nodes = set()  # nodes of earlier backwards whose roots are still alive
            live = self.live_tensors() if earlier else {}
            for i, b in enumerate(earlier):
                if b.get("retain_graph"):
                    continue
                ts = [live.get(r.get("tensor")) for r in b.get("roots") or []]
                ts = [t for t in ts if t is not None and t.grad_fn is not None]
                if not ts:
                    continue
                seen = {}
                _walk([t.grad_fn for t in ts], seen, budget, probe=False)
                for s in freed_set.intersection(seen):
                    freed_by.setdefault(s, i)
                earlier_nodes.update(seen)
            local = []
            items = list(uf.f_locals.items()) if uf is not None else []
            for name, v in items:
                if not isinstance(v, _Tensor) or name.startswith("__"):
                    continue
                gf = v.grad_fn
                if gf is None:
                    continue
                seq = gf._sequence_nr()
                mine = {}
                _walk([gf], mine, budget, probe=False, stop=freed_set)
                local.append({"name": name, "tensor": self.note_tensor(v), "seq": seq, "node": node_name(gf),
                              "in_failing_graph": seq in nodes, "reaches_freed": bool(freed_set & set(mine)),
                              "in_earlier_graph": (seq in earlier_nodes) if earlier_nodes else None})
                if len(local) >= 64:
                    break
            return {"freed": [{"seq": s, "node": nodes[s]["node"], "freed_by": freed_by.get(s)} for s in freed[:64]],
                    "nodes": len(nodes), "min_seq": min(nodes) if nodes else None, "locals": local}
        except Exception:
            return None
        finally:
            state.recorder = prev

    # --- helpers ------------------------------------------------------------------------

    def _loc(self, frame, uf):
        loc = {"file": None, "line": None, "segment": None, "library": None}
        if uf is not None:
            loc["file"] = uf.f_code.co_filename
            loc["line"] = uf.f_lineno
            loc["segment"] = call_segment(uf)
        if frame is not None and uf is not frame:
            loc["library"] = library_name(frame)
        return loc

    def _add_names(self, tid, names):
        if not names:
            return
        known = self.tensor_names.setdefault(tid, [])
        for n in names:
            if n not in known:
                known.append(n)


def _running_stat_in_training(node, p) -> bool:
    """A training-mode batch norm saves ``running_mean``/``running_var`` (inputs: packed before its
    kernel updates them, with no version bump) and its backward never reads them: no hazard."""
    try:
        if node is None or "BatchNorm" not in node.name() or not getattr(node, "_saved_training", False):
            return False
        t = p.tensor
        return not p.is_output and not t.requires_grad and t.dim() == 1
    except Exception:
        return False


def _def_line(code):
    """The `def` line of a function (``co_firstlineno`` is its first decorator's)."""
    first = code.co_firstlineno
    for line in range(first, first + 16):
        text = linecache.getline(code.co_filename, line).lstrip()
        if text.startswith(("def ", "async def ")):
            return line
    return first


_REWRAPS = ("tensor", "as_tensor")


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

    The function is a closure variable of torch's own wrapper frame, read through ``f_locals``:
    a torch frame (never the program's, see NOTE [No f_locals of running functions]) whose
    locals are the call's own arguments, alive for as long as the call anyway.
    """
    try:
        if frame.f_code.co_name != "decorate_context" or "func" not in frame.f_code.co_freevars:
            return None
        func = frame.f_locals.get("func")
        return getattr(func, "__code__", None)
    except Exception:
        return None


class _Where:
    """A stand-in frame (code object and instruction offset) for the source helpers of frames.py."""

    __slots__ = ("f_code", "f_lasti")

    def __init__(self, code, lasti):
        self.f_code = code
        self.f_lasti = lasti


def _is_freed_error(message: str) -> bool:
    return "second time" in message or "already been freed" in message


def _node_freed(node) -> bool:
    """True when reading one of the node's saved tensors fails because backward already freed it."""
    names = [a[len("_raw_saved_"):] for a in dir(node) if a.startswith("_raw_saved_")]
    attrs = ["_saved_" + n for n in names] or (["saved_tensors"] if hasattr(type(node), "saved_tensors") else [])
    for a in attrs:
        try:
            getattr(node, a)
        except RuntimeError as e:
            if _is_freed_error(str(e)):
                return True
        except Exception:
            pass
    return False


def _walk(stack, nodes, budget, probe, stop=()):
    """Collect ``sequence nr -> {node, freed}`` over a graph (AccumulateGrad excluded), within ``budget``."""
    while stack and budget[0] > 0:
        node = stack.pop()
        budget[0] -= 1
        try:
            if hasattr(node, "variable"):
                continue
            seq = node._sequence_nr()
            if seq in nodes:
                continue
            nodes[seq] = {"node": node_name(node), "freed": _node_freed(node) if probe else False}
            if seq in stop:
                continue
            stack.extend(n for n, _ in node.next_functions if n is not None)
        except Exception:
            continue


def make_tracker(program_path, **kwargs) -> Tracker:
    return Tracker(program_path, **kwargs)

