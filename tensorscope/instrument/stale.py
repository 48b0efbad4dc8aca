"""The failure path of a version error, read from the autograd graph after backward raised.

NOTE [Stale saved variable without hooks]
``tensorscope run`` registers no saved-tensor hooks (see NOTE [Hooks only under explain]
in saved.py), so PyTorch's own check raises the error and nothing is known at save time.
When backward fails with "modified by an inplace operation", the graph is walked from the
roots (bounded): reading ``node._saved_<name>`` runs PyTorch's own check, so the saved
variable that raises the same text is the stale one ("is at version N; expected version
M"). ``node._raw_saved_<name>.data`` gives its tensor without any check (an input is the
tensor itself; an output a detached alias sharing its storage and version counter), whose
storage and byte range are matched against the in-place writes the wrappers logged
(``Tracker.write_log``). Where ``.data`` does not exist (torch before 2.10; see NOTE [Reading a
saved tensor without its checks] in compat.py) the stale tensor is the program's live tensor that
torch's own error text describes (``named_by_error``). A saved variable whose unpack goes through
someone else's hook is never read (that would run the program's hook), and tensors of types we do
not understand are not looked into (see NOTE [Tensors we do not inspect] in saved.py).
"""

from __future__ import annotations

import re
from collections import deque

import torch

from tensorscope import compat
from tensorscope.instrument import saved, state
from tensorscope.instrument.quiet import quiet
from tensorscope.instrument.recorder import byte_span, node_name, storage_key

_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+) instead")
# "[torch.FloatTensor [2, 3]], which is output 0 of SigmoidBackward0, is at version 1": the output clause is
# absent for a tensor no node made (a leaf); 2.13 names the forward op ("of Sigmoid") instead of the node
_DESCRIBED = re.compile(r"inplace operation: \[\S+ \[([\d, ]*)\]\](?:, which is output (\d+) of (\w+),)? is at version")
MAX_WALK = 5000  # nodes read on the failure path
MAX_GRAPH = 200  # nodes kept in the report, nearest the stale one


def is_version_error(message: str) -> bool:
    return "modified by an inplace operation" in message


def is_stale_error(message: str) -> bool:
    """A backward that failed on one saved variable, found again by unpacking each (see NOTE [Stale saved
    variable without hooks]): a version error, or a saved tensor detached in place (``detach_()``)."""
    return is_version_error(message) or saved.DETACHED_IN_PLACE[:48] in message


def versions(message: str) -> tuple[int | None, int | None]:
    m = _VERSIONS.search(message or "")
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def _saved_names(node) -> tuple[list[str], set]:
    attrs = dir(node)
    return [a[len("_raw_saved_"):] for a in attrs if a.startswith("_raw_saved_")], set(attrs)


def _read(node, name, attrs):
    """Unpack one saved attribute as PyTorch would: (value, error text or None).

    Under ``quiet``: unpacking a wrapper subclass's output detaches it at dispatch
    level, which the subclass would see (and log); the tensor made here is never used.
    """
    attr = "_saved_" + name
    if attr not in attrs:
        attr = "saved_tensors"  # a custom autograd.Function keeps them in ctx.saved_tensors
    try:
        with quiet():
            return getattr(node, attr), None
    except RuntimeError as e:
        return None, str(e)
    except Exception:
        return None, None


def _others_hook(raw) -> bool:
    hook = compat.saved_unpack_hook(raw)
    return hook is not None and hook is not saved.unpack


def _raw_tensor(raw):
    """The saved tensor behind a SavedVariable, read without PyTorch's checks; None for types we skip."""
    try:
        with quiet():
            t = compat.saved_data(raw)
            if t is None or saved.unusual(t) is not None:
                return None
            return t
    except Exception:
        return None


def walk(roots, message: str):
    """Nodes reachable from ``roots`` (bounded) with their saved variables; the stale one marked.

    Returns ``(nodes, truncated)``: ``nodes`` maps sequence nr -> {"node", "name", "next",
    "saved": [{"name", "raws", "stale", "error"}]}, in walk order.
    """
    prev = state.recorder
    state.recorder = None  # our own unpack hook (explain) must not record these reads
    nodes: dict = {}
    try:
        queue = deque(r.grad_fn for r in roots if r.grad_fn is not None)
        budget = MAX_WALK
        while queue and budget > 0:
            node = queue.popleft()
            if node is None or hasattr(node, "variable"):
                continue
            try:
                seq = node._sequence_nr()
            except Exception:
                continue
            if seq in nodes:
                continue
            budget -= 1
            nxt = []
            for n, _ in node.next_functions:
                if n is not None and not hasattr(n, "variable"):
                    nxt.append(n)
                    queue.append(n)
            entries = []
            names, attrs = _saved_names(node)
            for name in names:
                try:
                    raw = getattr(node, "_raw_saved_" + name)
                except Exception:
                    continue
                raws = list(raw) if isinstance(raw, (list, tuple)) else [raw]
                if not raws or any(_others_hook(r) for r in raws):
                    continue
                value, error = _read(node, name, attrs)
                entries.append({"name": name, "raws": raws, "value": value, "error": error,
                                "stale": bool(error) and (is_version_error(error) or error == message)})
            nodes[seq] = {"node": node, "name": node_name(node), "next": nxt, "saved": entries}
        return nodes, bool(queue)
    finally:
        state.recorder = prev


def choose_stale(nodes: dict, message: str):
    """The saved variable backward failed on: the one raising the same text, last built first."""
    stale = [(seq, e) for seq, n in nodes.items() for e in n["saved"] if e["stale"]]
    if not stale:
        return None
    same = [(seq, e) for seq, e in stale if e["error"] == message]
    seq, entry = max(same or stale, key=lambda se: se[0])
    return seq, entry


def stale_tensor(entry, message: str):
    """The stale saved tensor itself (read without checks), or None."""
    _, expected = versions(message)
    now, _ = versions(entry["error"] or "")
    raws = [_raw_tensor(r) for r in entry["raws"]]
    raws = [t for t in raws if t is not None]
    for t in raws:
        if now is None or t._version == now:
            return t
    return raws[0] if raws else None


def named_by_error(message: str, live: dict, node=None):
    """The program's live tensor that a version error describes (shape, version, the node that made it
    and its output number), for releases whose saved variables cannot be read without checks; None when
    the text says too little or two tensors on different bytes fit it. A tensor ``node`` saved was made
    by ``node`` itself (an output) or by one of its next functions (an input). Among aliases of the same
    bytes the one seen first (the original, not a later ``detach()``) is taken."""
    m = _DESCRIBED.search(message or "")
    now, expected = versions(message)
    if m is None or now is None:
        return None
    shape = [int(d) for d in m.group(1).split(",") if d.strip()]
    output, maker = (int(m.group(2)), m.group(3)) if m.group(2) else (None, None)
    makers, bases = None, []
    if node is not None and maker is not None:
        try:
            inputs = [n for n, _ in node.next_functions if n is not None]
            makers = [node, *inputs]  # held: see NOTE [Nodes told apart by identity, not number]
            bases = [b for n in inputs for b, _ in n.next_functions if b is not None]
        except Exception:
            makers, bases = None, []
    fits = []
    for tid, t in live.items():
        try:
            with quiet():
                if t._version != now or list(t.shape) != shape or saved.unusual(t) is not None:
                    continue
                gf = t.grad_fn
                if maker is None:
                    if gf is not None:
                        continue
                elif gf is None or not (_made_by(gf, t.output_nr, output, maker, makers, now - expected)
                                        or _regenerated_view(t, gf, output, maker, bases)):
                    continue
                facts = tensor_facts(t)
        except Exception:
            continue
        if facts is not None:
            fits.append((int(tid[1:]) if tid[1:].isdigit() else 1 << 62, facts[:2], t))
    if len({(key, tuple(span)) for _, (key, span), _ in fits}) != 1:
        return None
    return min(fits, key=lambda f: f[0])[2]


def _made_by(gf, output_nr, output, maker, makers, writes) -> bool:
    """Whether the tensor with ``grad_fn`` ``gf`` is the one the error names: ``output`` of ``maker`` (its
    ``grad_fn`` when the error was raised), and, when ``makers`` (the saving node and its next functions)
    are known, reached from one of them: ``gf`` itself, or a node up to ``writes`` in-place writes back
    (a write autograd records rebases the tensor's history onto the write's node, whose next functions
    hold the one before). A write of the tensor itself rebases it onto the write's node (``AddBackward0``
    for ``a.add_(1)``), a write through a view rebases the base onto ``CopySlices``; the first next
    function of either is the node before the write: the error (raised on releases before 2.10 with the
    saving-time name) still names that node, which is then looked for up to ``writes`` rebases back
    (output 0 only: a rebased tensor's ``output_nr`` no longer tells the outputs apart).

    NOTE [Nodes told apart by identity, not number]
    ``makers`` are the node objects themselves, held by the caller, not their sequence nrs: each thread
    numbers its nodes from 0 (NOTE [Nodes other threads built] in lines.py), so two pool workers running
    one function build two ``TanhBackward0`` of one number, and each worker's ``h`` fitted the error
    text: two fits, no culprit (torch 2.2 to 2.9, which need this reading). While a node's Python object is
    alive, every read of that node (``grad_fn``, ``next_functions``) gives that same object, on 2.2.2,
    2.6.0, 2.9.1 and 2.15.0 (measured), so ``is`` tells the saving node from another thread's twin."""
    name, node, hops = node_name(gf), gf, 0
    while name not in (maker, maker + "Backward0") and hops < max(writes, 0):
        node = node.next_functions[0][0] if node.next_functions else None
        if node is None:
            return False
        name, hops = node_name(node), hops + 1
    if name not in (maker, maker + "Backward0") or (output_nr != output if hops == 0 else output != 0):
        return False
    if makers is None:
        return True
    level, seen = [gf], set()
    for _ in range(max(writes, 0) + 1):
        nxt = []
        for node in level:
            if any(node is m for m in makers):
                return True
            seq = node._sequence_nr()
            if seq not in seen:
                seen.add(seq)
                nxt.extend(n for n, _ in node.next_functions if n is not None and not hasattr(n, "variable"))
        level = nxt[:64]
    return False


def _regenerated_view(t, gf, output, maker, bases) -> bool:
    """Whether ``t`` is a view whose node autograd made anew after its version moved, from the view the
    saving node took as input (see NOTE [A view's node remade after a write] in compat.py): the node the
    error names is ``gf`` (output 0), and it leads to the same base node as one of the saving node's
    inputs did. ``bases``: the next functions of the saving node's next functions (held, so the identity
    of their Python objects is stable)."""
    if not bases or output != 0 or node_name(gf) not in (maker, maker + "Backward0") or not t._is_view():
        return False
    return any(b is base for b, _ in gf.next_functions if b is not None for base in bases)


def nearest(nodes: dict, start: int, limit: int = MAX_GRAPH) -> list[int]:
    """Sequence nrs of up to ``limit`` nodes nearest ``start`` (edges taken both ways)."""
    adj: dict = {s: set() for s in nodes}
    for s, n in nodes.items():
        for m in n["next"]:
            try:
                t = m._sequence_nr()
            except Exception:
                continue
            if t in adj:
                adj[s].add(t)
                adj[t].add(s)
    seen = [start]
    found = {start}
    queue = deque([start])
    while queue and len(seen) < limit:
        s = queue.popleft()
        for t in sorted(adj.get(s, ()), reverse=True):
            if t not in found:
                found.add(t)
                seen.append(t)
                queue.append(t)
                if len(seen) >= limit:
                    break
    return seen


def tensor_facts(value):
    """(storage key, byte range, version) of a saved tensor we understand, else None."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        with quiet():
            if saved.unusual(value) is not None:
                return None
            span = byte_span(value.shape, value.stride(), value.storage_offset(), value.numel(),
                             value.element_size())
            return storage_key(value), span, value._version
    except Exception:
        return None
