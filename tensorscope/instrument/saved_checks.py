"""Saved-tensor callbacks of a run: pack, stale unpack, and the silent-write check at unpack.

A collaborator owned by the run's Tracker (see NOTE [One recorder, its collaborators] in tracker.py);
every method must never raise into the program. See NOTE [Fingerprints of saved tensors] in saved.py.
"""

from __future__ import annotations

import linecache
import weakref

import torch

from tensorscope.instrument.fingerprint import checksum
from tensorscope.instrument.frames import call_segment, line_of, user_frame
from tensorscope.instrument.origin_walk import large_saved, saved_sum
from tensorscope.instrument.quiet import _LOUD, profiling, unrecorded
from tensorscope.instrument.recorder import node_name, storage_key

_current_node = torch._C._current_autograd_node
_TensorBase = torch._C.TensorBase
_MAX_NODE_LINES = 200_000
_MAX_LOGGED_STORAGES = 4096  # with 16 writes each: a few MB at most
_MAX_UNCHECKED = 200_000  # CUDA unpack checks waiting for the end of the program (a few bytes each)

_MAX_RETAINED = 100_000  # saved tensors one retaining backward re-fingerprints at most

# NOTE [A saved tensor its backward writes]
# Some backward kernels write into what their node saved: oneDNN's LSTM (MkldnnRnnLayerBackward0, torch's CPU
# ``nn.LSTM``) keeps a uint8 workspace as a saved output (``_saved_result3``, 32 KB for a 1-layer 16-unit LSTM on
# 5x4 inputs) and its backward rewrites it as scratch: torch 2.13 shows 4,463 of its bytes changed after one
# ``torch.autograd.grad(..., retain_graph=True)``, and a second backward through the same graph gives gradients
# equal to the first, bit for bit. The fingerprint taken at pack then differs at the next backward's unpack, at
# an unchanged version, and a graph kept with ``retain_graph=True`` (tests/corpus_retention/lstm_hidden_local_retain.py)
# got one false silent-saved-tensor-write per step, "between line 17 (saved) and line 21 (backward)", with no
# culprit. Only a backward that keeps its graph can be followed by another unpack of the same saved tensor, so
# each saved tensor such a backward unpacked is fingerprinted again when it returns (BackwardCalls.after): what
# its own nodes wrote is the new baseline; a write by the program between the two backward calls still differs.
_MAX_WALK = 20_000
_LOW_PRECISION = (torch.float16, torch.bfloat16)


class SavedChecks:
    """The callbacks of the saved-tensor hooks (saved.py), for one run."""

    def __init__(self, rec):
        self.rec = rec  # the run's Tracker
        self.numpy_shared: dict[int, dict] = {}  # storage key -> the `.numpy()`/`from_numpy` sharing it
        self.unchecked: list = []  # CUDA: (device flag, hazard facts) read once the program has ended
        self.retained: list = []  # unpacked by a backward that keeps its graph: NOTE [A saved tensor its backward writes]
        self.detached: dict | None = None  # the saved input found detached in place at unpack (explain)
        self._packs = 0
        self._next_sweep = 4096
        # what makes every node's gradient checked again (NOTE [Which nodes' gradients are checked]): a saved
        # float16/bfloat16 tensor, a saved tensor holding a NaN or an Inf
        self.low_precision = False
        self.nonfinite_saved = False
        self.large_saved = False  # a saved value a float32 gradient may overflow against (NOTE [Gradients that may overflow])

    # --- saved tensors ----------------------------------------------------------------

    def on_pack(self, p, t, frame):
        """Remember a saved tensor: the forward line, and its storage for the write checks.

        On the hot path (every tensor autograd saves): no tensor id, no byte range, no
        per-save closure; dead entries of ``pending`` are swept in batches.
        """
        rec = self.rec
        uf = user_frame(frame, rec.user)
        if uf is not None:
            p.file = uf.f_code.co_filename
            p.line = line_of(uf)
        else:
            running = rec.backward_calls.current
            if running is not None:
                # saved during backward (create_graph), maybe on an autograd worker thread (CUDA):
                # no user frame there; the user's line is the backward() call
                p.file = running["file"]
                p.line = running["line"]
        key = storage_key(t)
        p.storage_key = key
        if not self.low_precision and t.dtype in _LOW_PRECISION:
            self.low_precision = True
        if not self.nonfinite_saved and rec.values is not None and rec.values.grads is not None \
                and t.device.type == "cpu" and t.is_floating_point():
            v = saved_sum(t)
            if not self.large_saved and v - v == 0 and abs(v) > large_saved(t.dtype):
                self.large_saved = True
            if v - v != 0:
                self.nonfinite_saved = True
                if uf is not None and t.grad_fn is None:  # NOTE [A value computed outside autograd, in a frame gone]
                    rec.values.note_saved_outside(t, uf)
        p.orig = weakref.ref(t)
        if p.seq_nr is not None and p.line is not None:
            rec.node_lines[p.seq_nr] = (p.file, p.line)
        refs = rec.pending.get(key)
        if refs is None:
            rec.pending[key] = [weakref.ref(p)]
        else:
            refs.append(weakref.ref(p))
        self._packs += 1
        if self._packs >= self._next_sweep:
            self._sweep()
        if uf is not None and rec.allow("saved", uf):
            p.tid = rec.note_tensor(t)
            rec.emit("saved", uf, tensor=p.tid, version=p.version, output=p.is_output)

    def _sweep(self):
        """Drop saved-tensor records whose graph is gone; bound node_lines."""
        pending = self.rec.pending
        for key in list(pending):
            alive = [r for r in pending.get(key, ()) if r() is not None]  # a write may have dropped the key
            if alive:
                pending[key] = alive
            else:
                pending.pop(key, None)
        lines = self.rec.node_lines
        while len(lines) > _MAX_NODE_LINES:
            lines.popitem(last=False)
        self._next_sweep = self._packs + max(4096, 2 * sum(len(v) for v in pending.values()))

    def saved_tid(self, p):
        if p.tid is None:
            t = p.orig() if p.orig is not None else None
            if t is not None:
                p.tid = self.rec.note_tensor(t)
        return p.tid

    def on_detached_unpack(self, p):
        """Backward unpacks a saved input that was detached in place: who saved it (explain)."""
        if self.detached is None:
            node = _current_node()
            self.detached = {"tensor": self.saved_tid(p), "saved_file": p.file, "saved_line": p.line,
                             "node": node_name(node) if node is not None else None, "from": "pack"}

    def on_stale_unpack(self, p):
        rec = self.rec
        if rec.saved_failure is not None:
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
            facts["names"] = rec.tensor_names.get(p.tid, [])
        except Exception:
            pass
        rec.saved_failure = facts

    def note_numpy(self, op, t, frame):
        """A NumPy array and a tensor now share memory: NumPy's writes bump no version counter."""
        try:
            key = storage_key(t)
            rec = self.rec
            names = rec.names_in(frame, [t]).get(id(t), []) if op == "numpy" else []
            seg = call_segment(frame)
            log = self.numpy_shared
            if key not in log and len(log) >= _MAX_LOGGED_STORAGES:
                del log[next(iter(log))]
            log[key] = {"op": op, "file": frame.f_code.co_filename, "line": line_of(frame), "segment": seg,
                        "alias": seg, "library": None, "bumped": False, "tensor": rec.note_tensor(t),
                        "names": names}
            rec.watch.on_shared(rec.pending.get(key))
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
                with unrecorded() if profiling() else _LOUD:  # NOTE [Our ops unseen by the program's profiler]
                    flag = _TensorBase.ne(checksum(p.tensor), p.fingerprint)
                    changed = bool(flag) if flag.device.type == "cpu" else flag
            except Exception:
                changed = None
        swap = None
        if not p.is_output and p.storage_key is not None:
            try:
                if storage_key(p.tensor) != p.storage_key:
                    swap = self.rec.swaps.get(p.tid) or {}
            except Exception:
                pass
        if p.fingerprint is not None and self.rec.backward_calls.retaining and len(self.retained) < _MAX_RETAINED:
            self.retained.append(p)  # NOTE [A saved tensor its backward writes]
        if changed is False or changed is None and not p.silent and swap is None:
            return
        node = _current_node()
        if changed is not None and _running_stat_in_training(node, p):
            return
        facts = {
            "tensor": None, "version_at_save": p.version, "version_now": p.tensor._version,
            "saved_file": p.file, "saved_line": p.line, "node": node_name(node) if node is not None else None,
            "writes": list(p.silent or []) + ([swap] if swap else []), "backward": self.rec.backward_calls.current,
            "changed_at": p.changed_at,
        }
        if changed is None or changed is True:
            facts["tensor"] = self.saved_tid(p)
            if not facts["writes"]:
                facts["writes"] = self._unseen_writer(p, node)
            self.rec.add_hazard((facts["tensor"], p.seq_nr), facts)
        elif len(self.unchecked) < _MAX_UNCHECKED:
            # CUDA: nothing is read now; the graph walk for a custom Function is skipped here
            if not facts["writes"]:
                shared = self.numpy_shared.get(p.storage_key)
                facts["writes"] = [dict(shared)] if shared is not None else []
            self.unchecked.append((changed, p.tid, p.orig, p.seq_nr, facts))

    def refresh_retained(self):
        """A backward that keeps its graph has returned: the saved tensors it unpacked are checked again from the
        bytes its own nodes left (NOTE [A saved tensor its backward writes])."""
        kept, self.retained = self.retained, []
        for p in kept:
            try:
                with unrecorded() if profiling() else _LOUD:  # NOTE [Our ops unseen by the program's profiler]
                    p.fingerprint = checksum(p.tensor)
            except Exception:
                p.fingerprint = None

    def resolve_unchecked(self):
        """After the program has ended: the CUDA unpack checks whose bytes had changed become hazards."""
        pending, self.unchecked = self.unchecked, []
        for flag, tid, orig, seq, facts in pending:
            try:
                if not bool(flag):
                    continue
                t = orig() if orig is not None else None
                facts["tensor"] = tid if tid is not None else (self.rec.note_tensor(t) if t is not None else None)
                self.rec.add_hazard((facts["tensor"], seq), facts)
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
        roots = self.rec.backward_calls.roots
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
                        file, line = self.rec.node_line(seq)
                        return {"op": "custom_function", "function": cls.__name__,
                                "file": fwd.co_filename if fwd else file, "line": _def_line(fwd) if fwd else line,
                                "applied_file": file, "applied_line": line, "segment": None,
                                "alias": f"{cls.__name__}.forward", "library": None, "bumped": False}
                    stack.append(nxt)
        except Exception:
            return None
        return None


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
