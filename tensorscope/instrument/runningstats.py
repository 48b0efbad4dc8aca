"""Running statistics updated twice for one batch: a BatchNorm rerun by checkpoint recomputation, or on the same input.

NOTE [Running statistics updated twice]
A BatchNorm module in training mode updates ``running_mean``, ``running_var`` and
``num_batches_tracked`` on every call. Run again for the same batch, it updates them again: the batch
counts twice in the running average, and the statistics used at evaluation drift from those of the
data. Two ways this happens without any error:

- activation checkpointing (``torch.utils.checkpoint``, reentrant or not) recomputes the forward of
  the checkpointed part during backward, BatchNorm included;
- the program calls the model a second time on the same tensor in training mode with gradients off
  (a metric, a log line, an evaluation pass that forgot ``model.eval()``).

A second forward with gradients on is part of the training objective and meant: R-Drop's two passes
with their dropout masks, a consistency loss over two augmentations, a Siamese pair. Its output feeds
a loss, the BatchNorm sees that batch as the objective does, and no reference without the second update
exists to compare with. So what tells a rerun from a deliberate second forward is where the update is
made: during backward (recomputation: checkpointing reruns the forward inside the engine), or with
grad mode off (a measurement pass); never a forward with gradients on outside backward.

``_BatchNorm.forward`` (and ``SyncBatchNorm.forward``) advance ``num_batches_tracked`` with an
in-place ``add_`` from their own frame, which the write path sees: the one check on it compares the
writing frame's code object with these forwards' (by id). An update made while autograd's engine runs a
backward (``torch._C._current_graph_task_id() != -1``) is a recomputation; an update with grad mode off whose
input is the very tensor of the module's previous update (same object, or same memory and version: a
detached input of reentrant checkpointing) is the same batch twice. Both are reported once per module line and
rerunning line, with a count.
"""

from __future__ import annotations

import weakref

import torch

from tensorscope.instrument.frames import line_of, peek_locals
from tensorscope.instrument.kept import _program_frame

_Tensor = torch.Tensor
_MAX_MODULES = 1024


def _forward_codes() -> frozenset:
    codes = set()
    for name in ("_BatchNorm", "SyncBatchNorm"):
        cls = getattr(torch.nn.modules.batchnorm, name, None)
        fwd = vars(cls).get("forward") if cls is not None else None
        code = getattr(fwd, "__code__", None)
        if code is not None:
            codes.add(code)
    return frozenset(codes)


#: the ids of the code objects whose in-place write of ``num_batches_tracked`` marks one running-statistics
#: update (ids: hashing a code object hashes its contents, ~20x slower than an int; the classes keep them alive)
CODES = frozenset(id(c) for c in _forward_codes())
_task_id = getattr(torch._C, "_current_graph_task_id", lambda: -1)


def _signature(t):
    try:
        return (t.data_ptr(), tuple(t.shape), t.stride(), t._version)
    except Exception:
        return None


def _backward_caller(frame, user):
    """The program's frame that called backward (``loss.backward()``), above the engine's entry, or None."""
    f = frame
    while f is not None:
        if f.f_code.co_name == "_engine_run_backward":
            return _program_frame(f.f_back, user)
        f = f.f_back
    return None


class RunningStats:
    """The last update of each BatchNorm module, and the double updates found."""

    def __init__(self):
        self.last: dict[int, tuple] = {}  # id(module) -> (weakref of module, weakref of input, signature, where)
        self.found: dict = {}

    def on_update(self, rec, frame, uf):
        """``num_batches_tracked.add_(1)`` in a BatchNorm forward (see NOTE [Running statistics updated twice])."""
        try:
            scope = peek_locals(frame)
            module, x = scope.get("self"), scope.get("input")
            scope = None
            if module is None or not isinstance(x, _Tensor):
                return
            in_backward = _task_id() != -1
            # a recomputation's own frames are the program's forward: name the line that ran backward
            pf = _backward_caller(frame, rec.user) if in_backward else None
            if pf is None:
                pf = uf if uf is not None else _program_frame(frame, rec.user)
            here = (pf.f_code.co_filename, line_of(pf)) if pf is not None else (None, None)
            prev = self.last.get(id(module))
            sig = _signature(x)
            if prev is not None and prev[0]() is not module:
                prev = None
            same = False
            if prev is not None and not in_backward and not torch.is_grad_enabled():
                px = prev[1]()
                same = px is not None and (px is x or (prev[2] == sig and sig is not None))
            if prev is not None and (in_backward or same):
                self._found(rec, module, prev[3], here, "recomputed in backward" if in_backward else "same input")
            if len(self.last) >= _MAX_MODULES and id(module) not in self.last:
                self.last = {k: v for k, v in self.last.items() if v[0]() is not None}
                if len(self.last) >= _MAX_MODULES:
                    return
            if not in_backward:
                self.last[id(module)] = (weakref.ref(module), weakref.ref(x), sig, here)
        except Exception:
            pass

    def _found(self, rec, module, first, second, how):
        key = (first, second, how)
        facts = self.found.get(key)
        if facts is not None:
            facts["count"] += 1
            return
        stats = getattr(module, "num_batches_tracked", None)
        self.found[key] = {
            "kind": "running-stats-updated-twice", "how": how, "count": 1,
            "module": f"{type(module).__name__}({getattr(module, 'num_features', '')})",
            "tensor": rec.note_tensor(stats) if isinstance(stats, _Tensor) else None,
            "first": {"file": first[0], "line": first[1]},
            "second": {"file": second[0], "line": second[1]},
        }

    def finish(self, rec) -> None:
        for key, facts in self.found.items():
            rec.add_hazard(("running-stats",) + key, facts)
