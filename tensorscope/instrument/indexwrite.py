"""Index writes whose integer index holds a position twice: all but one update to it are dropped.

NOTE [Duplicate indices]
``g[idx] += 1`` reads ``g[idx]``, adds, and writes the result back with ``index_put_``: where ``idx``
holds a position twice, both results land on it and one is lost (``accumulate=False`` keeps one
of them, which one is not even defined). ``index_put_`` with a per-position value does the same.
The check runs after such a write on a program line, on CPU only (``unique`` on a GPU index would
synchronise), for an integer index tensor and a value with more than one element (a scalar written
twice is written once, nothing is lost), at most ``per_site`` times per line.
``index_add_`` and ``index_put_(..., accumulate=True)`` add every update and are not checked.
"""

from __future__ import annotations

import torch

from tensorscope.instrument.frames import receiver, user_frame

_Tensor = torch.Tensor
_unique = torch.unique
#: the ops that write through an index (the `setitem` of `g[idx] = v` and `g[idx] += v`)
INDEX_WRITES = frozenset({"setitem", "index_put_"})


def _index_tensors(index):
    if isinstance(index, _Tensor):
        return [(0, index)]
    if isinstance(index, (tuple, list)):
        return [(d, i) for d, i in enumerate(index) if isinstance(i, _Tensor)]
    return []


def duplicates(target, index):
    """(positions written more than once, index size), or None: integer CPU index tensors only."""
    found = _index_tensors(index)
    if not found:
        return None
    for _, t in found:
        if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype in (torch.bool, torch.uint8) \
                or t.device.type != "cpu":
            return None
    with torch.no_grad():
        if len(found) == 1:
            dim, t = found[0]
            flat = t.reshape(-1)
            if isinstance(index, (tuple, list)) and any(i is Ellipsis or i is None for i in index[:dim]):
                size = None
            else:
                size = target.shape[dim] if dim < target.dim() else None
            if size:
                flat = flat % size  # -1 and size - 1 are one position
            n = flat.numel()
            u = _unique(flat).numel() if n > 1 else n
        else:
            cols = torch.broadcast_tensors(*(t for _, t in found))
            stacked = torch.stack([c.reshape(-1) for c in cols])
            n = stacked.shape[1]
            u = _unique(stacked, dim=1).shape[1] if n > 1 else n
    return (n - u, n) if u < n else None


def check(rec, op, args, kwargs, frame) -> None:
    """After an index write (see NOTE [Duplicate indices]); never raises."""
    try:
        if op == "setitem":
            if len(args) < 3:
                return
            target, index, value = args[0], args[1], args[2]
        else:
            target = args[0] if args else kwargs.get("self")
            index = args[1] if len(args) > 1 else kwargs.get("indices")
            value = args[2] if len(args) > 2 else kwargs.get("values")
            accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
            if accumulate:
                return
        if not isinstance(value, _Tensor) or value.numel() <= 1 or not _index_tensors(index):
            return
        uf = user_frame(frame, rec.user)
        if uf is None:
            return
        site = (uf.f_code.co_filename, uf.f_lineno)
        n = rec.index_checks.get(site, 0) + 1
        rec.index_checks[site] = n
        if n > rec.per_site:
            return
        found = duplicates(target, index)
        if found is None:
            return
        loc = rec.location(frame, uf)
        facts = {"kind": "duplicate-index-write", "tensor": rec.note_tensor(target), "op": op,
                 "file": loc["file"], "line": loc["line"], "library": loc["library"],
                 "alias": receiver(loc["segment"], op) if loc["library"] is None else loc["segment"],
                 "repeated": found[0], "indices": found[1], "value_numel": value.numel()}
        rec.add_hazard(("index_write", loc["file"], loc["line"]), facts)
    except Exception:
        pass
