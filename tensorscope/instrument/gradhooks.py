"""Gradients written in place by the program's tensor hooks (explain, run --check-values).

NOTE [Gradient hooks writing in place]
A hook registered with ``Tensor.register_hook`` "should not modify its argument". When it
does (``g.mul_(10)`` instead of ``return g * 10``), the write bumps only the gradient's own
version, which nothing saved: no error. Where autograd hands the same gradient tensor to more
than one branch (``AddBackward0`` passes its incoming gradient to both inputs), the other branch
silently gets the changed values. So, for a hook the program registers, a checking hook is
registered right after it (it runs after it, on the gradient the program's hook left): a
gradient whose version moved, that something else still holds (the tensor's use count: the
engine's reference and the hook argument's, plus another branch's), and whose last in-place
write was recorded at a line of the program (``Tracker.write_log``) is a silent write of a
gradient. Only under explain / --check-values; ``run`` registers nothing. torch 2.2 and 2.3 have no
use count: no check there, a note instead (NOTE [A tensor's use count] in compat.py).
"""

from __future__ import annotations

import sys

from tensorscope import compat
from tensorscope.instrument import state
from tensorscope.instrument.frames import strip_for_reraise
from tensorscope.instrument.recorder import storage_key
from tensorscope.instrument.records import LoggedWrite
from tensorscope.instrument.transparent import named

SHARED_USE_COUNT = 3  # measured on torch 2.13 inside a hook: 2 when only this branch holds it


def make_register_hook(orig):
    def register_hook(self, hook):
        try:
            handle = orig(self, hook)  # raises exactly as torch does (no grad, ...) before anything of ours
        except BaseException as e:
            strip_for_reraise(e)  # NOTE [Invisible frames] in patches.py
            raise
        rec = state.recorder
        if rec is None or not rec.active or not rec.check_values:
            return handle
        try:
            frame = sys._getframe(1)
            if frame.f_code.co_filename in rec.user:
                if compat.tensor_use_count is None:  # NOTE [A tensor's use count] in compat.py
                    rec.note(compat.NO_USE_COUNT_NOTE)
                else:
                    orig(self, _checker(rec))
        except Exception:
            pass
        return handle

    return named(register_hook, orig)


def _checker(rec):
    def check(grad):
        try:
            if grad._version > 0 and grad._use_count() >= SHARED_USE_COUNT:
                _report(rec, grad)
        except Exception:
            pass
        return None

    return check


def _report(rec, grad):
    key = storage_key(grad)
    recs = map(LoggedWrite._make, reversed(rec.write_log.get(key) or []))
    last = next((w for w in recs if w.version_after == grad._version and w.code is not None), None)
    if last is None:
        return
    code, line = last.code, last.line
    write = {"op": "grad_hook", "inner_op": last.op, "file": code.co_filename, "line": line,
             "function": code.co_name, "segment": None, "alias": None, "library": None, "bumped": True}
    facts = {"tensor": rec.note_tensor(grad), "version_at_save": 0, "version_now": grad._version,
             "saved_file": None, "saved_line": None, "node": None, "writes": [write],
             "backward": rec.backward_calls.current}
    rec.add_hazard(("grad_hook", code.co_filename, line), facts)
