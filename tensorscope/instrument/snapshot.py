"""The end-of-run picture: which live tensors are bound to which names, as plain data.

This runs after the program has finished (or failed), with recording switched
off. It probes version-counter sharing by bumping and restoring a counter
(there is no public API for it; see the internals notes), which is invisible
to the program because the program is no longer running.
"""

from __future__ import annotations

import types

import torch


_Tensor = torch.Tensor
_MAX_SCAN = 2000


def _named_tensors(scope: dict, prefix: str = ""):
    """(name, tensor) pairs for tensors bound in a namespace, nn.Module parameters and buffers included."""
    out = []
    items = list(scope.items())[:_MAX_SCAN]
    for name, value in items:
        if name.startswith("__") and name.endswith("__"):
            continue
        full = prefix + name
        if isinstance(value, _Tensor):
            out.append((full, value))
        elif isinstance(value, torch.nn.Module):
            try:
                for pname, p in value.named_parameters(prefix=full, remove_duplicate=False):
                    out.append((pname, p))
                for bname, b in value.named_buffers(prefix=full, remove_duplicate=False):
                    if b is not None:
                        out.append((bname, b))
            except Exception:
                pass
        elif isinstance(value, (list, tuple)) and 0 < len(value) <= 64:
            for i, v in enumerate(value):
                if isinstance(v, _Tensor):
                    out.append((f"{full}[{i}]", v))
        elif isinstance(value, dict) and 0 < len(value) <= 64 and not isinstance(value, types.MappingProxyType):
            for k, v in list(value.items()):
                if isinstance(v, _Tensor) and isinstance(k, (str, int)):
                    out.append((f"{full}[{k!r}]", v))
    return out


def _shares_counter(a, b) -> bool:
    """Probe: does bumping a's version counter move b's? Restores a's counter exactly."""
    old = a._version
    before_b = b._version
    torch._C._autograd._unsafe_set_version_counter((a,), (old + 1,))
    try:
        return b._version != before_b
    finally:
        torch._C._autograd._unsafe_set_version_counter((a,), (old,))


def take(tracker, main_globals: dict | None, exc: BaseException | None) -> dict:
    """Collect the live named tensors into the tracker's facts; return tid -> names."""
    named: dict[str, list[str]] = {}
    live: dict[str, object] = {}

    def add(name, t):
        tid = tracker.note_tensor(t)
        live[tid] = t
        names = named.setdefault(tid, [])
        if name not in names:
            names.append(name)

    if main_globals is not None:
        for name, t in _named_tensors(main_globals):
            add(name, t)
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if code.co_filename in tracker.user and code.co_name != "<module>":
            try:
                scope = dict(frame.f_locals)
            except Exception:
                scope = {}
            for name, t in _named_tensors(scope, prefix=f"{code.co_name}."):
                add(name, t)
        tb = tb.tb_next
    # other tensors seen during the run and still alive
    for tid, t in tracker.live_tensors().items():
        if tid not in live:
            tracker.note_tensor(t)
            live[tid] = t
    # views: of which tensor
    view_of: dict[str, str] = {}
    for tid, t in list(live.items()):  # bases are added to `live` as they are found
        try:
            base = t._base
        except Exception:
            base = None
        if base is not None:
            view_of[tid] = tracker.note_tensor(base)
            live.setdefault(view_of[tid], base)
    # version counters: probe among live tensors on the same storage
    counters: dict[str, str] = {}
    by_storage: dict = {}
    for tid, t in live.items():
        key = tracker.tensor_facts.get(tid, {}).get("_storage_key")
        if key is not None:
            by_storage.setdefault(key, []).append(tid)
    n = 0
    for tid in sorted(live, key=lambda s: int(s[1:])):
        if tid in counters:
            continue
        n += 1
        vid = f"v{n}"
        counters[tid] = vid
        key = tracker.tensor_facts.get(tid, {}).get("_storage_key")
        for other in by_storage.get(key, []):
            if other == tid or other in counters:
                continue
            try:
                if _shares_counter(live[tid], live[other]):
                    counters[other] = vid
            except Exception:
                pass
    has_grad: dict[str, object] = {}
    for tid, t in live.items():
        try:
            has_grad[tid] = (t.grad is not None) if t.is_leaf else None
        except Exception:
            has_grad[tid] = None
    return {"named": named, "alive": set(live), "view_of": view_of, "counters": counters,
            "has_grad": has_grad}

