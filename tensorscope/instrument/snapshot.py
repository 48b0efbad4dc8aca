"""The end-of-run picture: which live tensors are bound to which names, as plain data.

This runs after the program has finished (or failed), with recording switched
off. It probes version-counter sharing by bumping and restoring a counter
(there is no public API for it; see the internals notes), which is invisible
to the program because the program is no longer running.

Names come from the program's globals (and the locals of its frames on a failure):
tensors, ``nn.Module`` parameters and buffers, tensors in lists, tuples and dicts, and
optimizers, whose state is named by its parameter (``opt.state[model.head.weight].exp_avg``).
"""

from __future__ import annotations

import torch

from tensorscope import compat
from tensorscope.recording import _in_tid_order, group_add


_Tensor = torch.Tensor
_MAX_SCAN = 2000
# Tensors taken from lists, tuples and dicts, all containers together: a bound on the report's
# size, never a silent one (the report says how many were left out).
MAX_CONTAINER_TENSORS = 10_000


class _Names:
    """(name, tensor, role) triples found in namespaces, with the container bound applied."""

    def __init__(self):
        self.found: list[tuple[str, object, str | None]] = []
        self.optimizers: list[tuple[str, object]] = []
        self.container_tensors = 0
        self.left_out = 0

    def _container(self, name, t):
        if self.container_tensors >= MAX_CONTAINER_TENSORS:
            self.left_out += 1
            return
        self.container_tensors += 1
        self.found.append((name, t, None))

    def scan(self, scope: dict, prefix: str = "") -> None:
        items = list(scope.items())[:_MAX_SCAN]
        for name, value in items:
            if not isinstance(name, str) or (name.startswith("__") and name.endswith("__")):
                continue
            full = prefix + name
            try:
                self._one(full, value)
            except Exception:  # a user's object never breaks the report
                pass

    def _one(self, full, value) -> None:
        # by type(), never isinstance(): isinstance falls back to the object's ``__class__``, which
        # runs the program's code on a proxy (a deprecated alias warns: torch.distributed.reduce_op)
        cls = type(value)
        if issubclass(cls, _Tensor):
            self.found.append((full, value, None))
        elif issubclass(cls, torch.nn.Module):
            for pname, p in value.named_parameters(prefix=full, remove_duplicate=False):
                self.found.append((pname, p, "parameter"))
            for bname, b in value.named_buffers(prefix=full, remove_duplicate=False):
                if b is not None:
                    self.found.append((bname, b, "buffer"))
        elif issubclass(cls, torch.optim.Optimizer):
            self.optimizers.append((full, value))
        elif issubclass(cls, (list, tuple)):
            for i, v in enumerate(value):
                if issubclass(type(v), _Tensor):
                    self._container(f"{full}[{i}]", v)
        elif issubclass(cls, dict):
            for k, v in list(value.items()):
                if issubclass(type(v), _Tensor) and issubclass(type(k), (str, int)):
                    self._container(f"{full}[{k!r}]", v)


def _optimizer_names(names: _Names, param_name) -> list[dict]:
    """Name each optimizer's parameters and state tensors; plain facts about each optimizer.

    ``param_name(p)`` is the program's name of a parameter (or None); a parameter the program
    names nowhere is named by its place in the optimizer (``opt.param_groups[0][3]``).
    """
    out = []
    seen = set()
    for oname, opt in names.optimizers:
        if id(opt) in seen:
            continue
        seen.add(id(opt))
        params = []
        try:
            for g, group in enumerate(opt.param_groups):
                for i, p in enumerate(group.get("params", [])):
                    if not isinstance(p, _Tensor):
                        continue
                    pname = param_name(p)
                    if pname is None:
                        pname = f"{oname}.param_groups[{g}][{i}]"
                        names.found.append((pname, p, "parameter"))
                    params.append((p, pname))
            state = opt.state
            keys: list[str] = []
            for p, pname in params:
                st = state.get(p) if isinstance(state, dict) else None
                if not isinstance(st, dict):
                    continue
                for k, v in st.items():
                    if isinstance(v, _Tensor):
                        names.found.append((f"{oname}.state[{pname}].{k}", v, "optimizer_state"))
                        if k not in keys:
                            keys.append(str(k))
        except Exception:
            pass
        out.append({"name": oname, "type": type(opt).__name__, "_params": [p for p, _ in params],
                    "state_keys": keys})
    return out


def _shares_counter(a, b) -> bool:
    """Probe: does bumping a's version counter move b's? Restores a's counter exactly."""
    old = a._version
    before_b = b._version
    compat.set_version_counter(a, old + 1)
    try:
        return b._version != before_b
    finally:
        compat.set_version_counter(a, old)


def take(tracker, main_globals: dict | None, exc: BaseException | None) -> dict:
    """Collect the live named tensors into the tracker's facts; return tid -> names."""
    named: dict[str, tuple] = {}  # NOTE [A tensor's names, one tuple from the snapshot to the row]
    live: dict[str, object] = {}
    roles: dict[str, str] = {}

    tids: dict[int, str] = {}  # id(tensor) -> tid: each tensor described once, however many names it has

    def add(name, t, role=None):
        tid = tids.get(id(t))
        if tid is None:
            tid = tids[id(t)] = tracker.note_tensor(t)
        live[tid] = t
        names = named.get(tid)
        if names is None:
            named[tid] = (name,)
        elif name not in names:
            named[tid] = (*names, name)
        if role is not None:
            roles.setdefault(tid, role)
        return tid

    scanned = _Names()
    if main_globals is not None:
        scanned.scan(main_globals)
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if code.co_filename in tracker.user and code.co_name != "<module>":
            try:
                scope = dict(frame.f_locals)
            except Exception:
                scope = {}
            scanned.scan(scope, prefix=f"{code.co_name}.")
        tb = tb.tb_next
    first_name: dict[int, str] = {}
    for name, t, _ in scanned.found:
        first_name.setdefault(id(t), name)
    optimizers = _optimizer_names(scanned, lambda p: first_name.get(id(p)))
    found = scanned.found
    first_name = None
    for i, (name, t, role) in enumerate(found):  # each triple goes as its name is added (the list's 25,000 on
        found[i] = None  # a model of 5,000 parameters with Adam, 1.6 MB, were the snapshot's peak: RESULTS.md "rss21")
        add(name, t, role)
    found = None
    for o in optimizers:
        o["parameters"] = [tids.get(id(p)) or tracker.note_tensor(p) for p in o.pop("_params")]
    left_out = scanned.left_out
    # the names found, with their tensors, and the id() tables go before the tensors met only by the id table are
    # described: one entry a tensor of each was the snapshot's peak (benchmarks/RESULTS.md, "mem16, 2026-11-26")
    scanned = first_name = tids = None
    if left_out:
        tracker.note(f"{left_out:,} tensors in lists, tuples and dicts were left out of the report "
                     f"(at most {MAX_CONTAINER_TENSORS:,} are taken from containers)")
    # other tensors seen during the run and still alive
    for tid, t in tracker.iter_live():
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
    facts = tracker.tensor_facts
    for tid, t in live.items():  # a storage's one tensor as its tid, a list only where several share it
        key = facts[tid].storage_key if tid in facts else None
        if key is not None:
            group_add(by_storage, key, tid)
    # only storages of several tensors are probed: the others' entries go before the counters are made (the
    # snapshot's peak: benchmarks/RESULTS.md, "rss21")
    by_storage = {key: tids for key, tids in by_storage.items() if type(tids) is not str}
    n = 0
    for tid in sorted(live, key=lambda s: int(s[1:])):
        if tid in counters:
            continue
        n += 1
        vid = f"v{n}"
        counters[tid] = vid
        key = facts[tid].storage_key if tid in facts else None
        mates = by_storage.get(key)
        if mates is None or type(mates) is str:  # alone on its storage
            continue
        for other in mates:
            if other == tid or other in counters:
                continue
            try:
                if _shares_counter(live[tid], live[other]):
                    counters[other] = vid
            except Exception:
                pass
    del by_storage
    has_grad: dict[str, object] = {}
    for tid, t in live.items():
        try:
            has_grad[tid] = (t.grad is not None) if t.is_leaf else None
        except Exception:
            has_grad[tid] = None
    # the ids alone, in id order (the recording's order): the tensors themselves are not held past this
    # in_tid_order: no key tuple a tensor (20,000 of them, 1.3 MB, were the snapshot's peak: RESULTS.md "rss21")
    alive = tuple(_in_tid_order(live))
    live = None
    return {"named": named, "alive": alive, "view_of": view_of, "counters": counters,
            "has_grad": has_grad, "roles": roles, "optimizers": optimizers}

