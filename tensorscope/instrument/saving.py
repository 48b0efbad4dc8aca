"""``torch.save`` of a view that pins a much larger storage: it writes the whole storage to the file.

PyTorch saves storages, not tensors, to keep views shared when loaded back (its serialization notes),
so ``torch.save(x[:10], path)`` writes all of ``x``. The wrapper looks at the object saved (a tensor,
or the tensors directly in a list, tuple or dict) before calling the original, records a
``view-pins-storage`` hazard fact for each view whose storage is at least PIN_RATIO times its bytes
and PIN_MIN_BYTES (see instrument/growth.py), and never changes the call.
"""

from __future__ import annotations

import functools
import sys

import torch

from tensorscope.instrument.frames import user_frame
from tensorscope.instrument.retention import PIN_MIN_BYTES, PIN_RATIO
from tensorscope.instrument.recorder import storage_key

_Tensor = torch.Tensor


def install(tracker, patcher) -> None:
    orig = torch.save

    @functools.wraps(orig)
    def save(obj, *args, **kwargs):
        if tracker.active:
            _check(tracker, obj, sys._getframe(1))
        return orig(obj, *args, **kwargs)

    patcher._set(torch, "save", save)


def _check(tracker, obj, frame) -> None:
    try:
        items = [obj] if issubclass(type(obj), _Tensor) else (
            list(obj) if type(obj) in (list, tuple) else list(obj.values()) if type(obj) is dict else [])
        uf = user_frame(frame, tracker.user)
        if uf is None:
            return
        with torch._C.DisableTorchFunction():
            for t in items[:64]:
                if not issubclass(type(t), _Tensor) or t._base is None:
                    continue
                reach = t.numel() * t.element_size()
                whole = t.untyped_storage().nbytes()
                if whole < PIN_MIN_BYTES or whole < PIN_RATIO * max(reach, 1):
                    continue
                tid = tracker.note_tensor(t)
                c = tracker.tensor_created.get(tid) or {}
                line = uf.f_lineno
                tracker.add_hazard(("torch.save", storage_key(t), uf.f_code.co_filename, line), {
                    "kind": "view-pins-storage", "retention": True, "holder": None, "where": None,
                    "path": [], "bytes_per_step": 0, "nodes_per_step": 0, "bytes": whole, "nbytes": reach,
                    "storage_nbytes": whole, "tensor": tid,
                    "alloc": {"file": c["file"], "line": c["line"], "how": c.get("how")} if c.get("line") else None,
                    "save": {"file": uf.f_code.co_filename, "line": line}})
    except Exception:  # a surprising object loses the check, never the save
        pass
