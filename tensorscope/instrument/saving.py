"""``torch.save`` of a view that pins a much larger storage: it writes the whole storage to the file.

PyTorch saves storages, not tensors, to keep views shared when loaded back (its serialization notes),
so ``torch.save(x[:10], path)`` writes all of ``x``. The wrapper looks at the object saved (a tensor,
or the tensors in its lists, tuples and dicts, a few levels deep) before calling the original, records
a ``view-pins-storage`` hazard fact for each storage at least PIN_RATIO times the most bytes a saved
tensor of it reaches and at least PIN_MIN_BYTES (see instrument/retention.py), and never changes the call.
"""

from __future__ import annotations

import functools
import sys

import torch

from tensorscope.instrument.frames import strip_for_reraise, user_frame
from tensorscope.instrument.retention import PIN_MIN_BYTES, PIN_RATIO
from tensorscope.instrument.recorder import storage_key

_Tensor = torch.Tensor


def install(tracker, patcher) -> None:
    orig = torch.save

    @functools.wraps(orig)
    def save(obj, *args, **kwargs):
        if tracker.active:
            _check(tracker, obj, sys._getframe(1))
        try:  # NOTE [Invisible frames] in patches.py
            return orig(obj, *args, **kwargs)
        except BaseException as e:
            strip_for_reraise(e)
            raise

    patcher._set(torch, "save", save)


def _tensors(obj, depth: int = 0, where: str = ""):
    """(label, tensor) for the tensors in what is saved: the object, and lists, tuples and dicts of it
    (``{'model': {'emb': t}}`` gives ``['model']['emb']``), a few levels deep and at most _MAX_TENSORS."""
    if issubclass(type(obj), _Tensor):
        yield where, obj
    elif depth < 4 and type(obj) in (list, tuple):
        for i, v in enumerate(obj[:_MAX_TENSORS]):
            yield from _tensors(v, depth + 1, f"{where}[{i}]")
    elif depth < 4 and issubclass(type(obj), dict):  # an OrderedDict state_dict too
        for k, v in list(dict.items(obj))[:_MAX_TENSORS]:
            yield from _tensors(v, depth + 1, f"{where}[{k!r}]")


def _check(tracker, obj, frame) -> None:
    try:
        uf = user_frame(frame, tracker.user)
        if uf is None:
            return
        with torch._C.DisableTorchFunction():
            found: dict = {}  # storage -> [its bytes, the most bytes a saved tensor of it reaches, (label, tensor)]
            for n, (label, t) in enumerate(_tensors(obj)):
                if n >= _MAX_TENSORS:
                    break
                key = storage_key(t)
                reach = t.numel() * t.element_size()
                entry = found.get(key)
                if entry is None:
                    found[key] = [t.untyped_storage().nbytes(), reach, (label, t)]
                elif reach > entry[1]:
                    entry[1] = reach
            for key, (whole, reach, (label, t)) in found.items():
                # NOTE [What torch.save writes]: not only views: `x[:10].detach()` has no `_base` and
                # still shares (and writes) x's storage
                if whole < PIN_MIN_BYTES or whole < PIN_RATIO * max(reach, 1):
                    continue
                tid = tracker.note_tensor(t)
                c = tracker.tensor_created.get(tid) or {}
                line = uf.f_lineno
                tracker.add_hazard(("torch.save", key, uf.f_code.co_filename, line), {
                    "kind": "view-pins-storage", "retention": True, "holder": None, "where": None,
                    "path": [], "bytes_per_step": 0, "nodes_per_step": 0, "bytes": whole, "nbytes": reach,
                    "storage_nbytes": whole, "tensor": tid,
                    "alloc": {"file": c["file"], "line": c["line"], "how": c.get("how")} if c.get("line") else None,
                    "save": {"file": uf.f_code.co_filename, "line": line, "item": label}})
    except Exception:  # a surprising object loses the check, never the save
        pass


_MAX_TENSORS = 256

# NOTE [What torch.save writes]
# torch.save writes each storage once, whole, whatever part of it the saved tensors reach (so that
# views stay views when loaded). Measured with torch 2.13: `torch.save(x[:10], f)` and
# `torch.save(x[:10].detach(), f)` of a 1000x1000 float tensor both write a 4 MB file; `.clone()` a
# 40 KB one. So the check is on the storage (its bytes against the most any saved tensor of it
# reaches), not on `_base`, and it looks into the lists, tuples and dicts being saved.
