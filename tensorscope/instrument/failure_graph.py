"""The graph of a failing backward, read on the failure path: the stale saved tensor of a version
error found without hooks, the plain graph for the report, and the freed nodes of a second backward.

A collaborator owned by the run's Tracker (see NOTE [One recorder, its collaborators] in tracker.py).
See NOTE [Stale saved variable without hooks] in stale.py.
"""

from __future__ import annotations

import threading

import torch

from tensorscope import compat
from tensorscope.instrument import stale, state
from tensorscope.instrument.frames import call_segment, library_name, peek_locals, receiver
from tensorscope.instrument.recorder import byte_range as _byte_range, node_name
from tensorscope.instrument.records import LoggedWrite, write_facts

_Tensor = torch.Tensor
_MAX_WALK = 20_000
#: nodes walked below a tensor two backward graphs share, for the leaves it was built from (kinds/backward_twice.py)
_MAX_SHARED_LEAVES = 2_000


_get_ident = threading.get_ident
# NOTE [Leaves cached per backward line and thread]
# Two tables keep, per backward line, the leaves its graph reached, so that a training loop's later
# calls need not walk their graph again (backward_calls: NOTE [Walking a large graph once per line];
# nonfinite: the gradients checked after a backward). A line is not one graph. Threads that train
# each their own model run the same ``loss.backward()`` line: with one entry per line, a thread read
# the ``.grad`` of another thread's leaves while that thread's backward, which runs without the GIL,
# was writing them, and the process died of a segmentation fault (explain, four threads with a NaN in
# one: 2 runs of 3). And a helper ``def step(model, x)`` that trains two models reaches two sets of
# leaves from one line: the second model's gradients were never checked. So the tables are keyed by
# line and thread, and an entry is used only if the first leaf that a walk of at most ``_PROBE`` nodes
# from this call's roots finds is the entry's first (the walk's order is the full walk's, so its
# first leaf is the same when the graph is): a loss's last layer is a few nodes from the root. A
# graph with no leaf within ``_PROBE`` nodes trusts its entry.
_PROBE = 32


def leaves_key(site) -> tuple:
    """The key of a backward line's cached leaves (NOTE [Leaves cached per backward line and thread])."""
    return site, _get_ident()


def same_leaves(roots, known: list) -> bool:
    """Whether ``known`` (weak references, in ``accumulated_leaves``' order) are the leaves of ``roots``' graph
    (NOTE [Leaves cached per backward line and thread])."""
    first = _first_leaf(roots, _PROBE)
    if first is None:
        return True
    return bool(known) and known[0]() is first


# NOTE [The probe's first leaf, walked in place]
# ``same_leaves`` runs at every backward call of a training loop (twice for the calls whose events are recorded),
# so ``_first_leaf`` is ``_leaves_in_order``'s walk written out for its first leaf alone: the same order (a node
# popped from the end of the stack, its edges read in order, the first ``AccumulateGrad`` edge not visited yet
# is the leaf), the same bound (``limit`` nodes popped), the same node kept in ``visited`` for each id (so no id
# is reused by a node freed during the walk), the same ``hasattr(node, "variable")`` test, and a node whose edges
# raise passed over as there; without the generator, the roots' list comprehension and the ``seen`` set a first
# leaf never needs. Python's frames and containers were most of the probe's cost, not torch's node objects:
# small_mlp's probe (three nodes, three ``next_functions`` tuples; torch's part about 4k) 26.8k -> 14.8k
# instructions a call (callgrind).
def _first_leaf(roots, limit: int):
    """``accumulated_leaves(roots, limit)[0][0]`` (or None), found without walking past it."""
    stack = []
    visited = {}
    for r in roots:
        node = r.grad_fn
        if node is not None:
            stack.append(node)
            visited[id(node)] = node
    n = 0
    while stack and n < limit:
        node = stack.pop()
        n += 1
        try:
            for nxt, _ in node.next_functions:
                if nxt is None:
                    continue
                k = id(nxt)
                if k in visited:
                    continue
                visited[k] = nxt
                if hasattr(nxt, "variable"):
                    return nxt.variable
                stack.append(nxt)
        except Exception:
            continue
    return None


def accumulated_leaves(roots, limit: int = _MAX_WALK) -> tuple[list, int]:
    """The leaf tensors a backward from ``roots`` accumulates into (AccumulateGrad nodes), and the
    number of nodes walked (at most ``limit``).

    Each node once: a graph with residual connections reaches a node along many paths. The nodes are
    kept (the dict's values) so that no id is reused by another node during the walk.
    """
    visited: dict = {}
    out = list(_leaves_in_order(roots, limit, visited))
    return out, len(visited)


def _leaves_in_order(roots, limit: int, visited: dict):
    """Yield ``accumulated_leaves``' leaves in its order, each once, filling ``visited`` (id -> node) as it walks."""
    seen = set()
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    visited.update((id(node), node) for node in stack)
    n = 0
    while stack and n < limit:
        node = stack.pop()
        n += 1
        try:
            for nxt, _ in node.next_functions:
                if nxt is None or id(nxt) in visited:
                    continue
                visited[id(nxt)] = nxt
                if hasattr(nxt, "variable"):
                    v = nxt.variable
                    if id(v) not in seen:
                        seen.add(id(v))
                        yield v
                else:
                    stack.append(nxt)
        except Exception:
            continue


def _saved_values(entry) -> list:
    """The tensors of a saved variable: read without checks where torch can, else (torch 2.2 to 2.9) the
    getter's own value, which a tensor detached in place does not stop (NOTE [Reading a saved tensor without
    its checks] in compat.py)."""
    values = [stale._raw_tensor(r) for r in entry["raws"]]
    if compat.CAN_READ_SAVED_DATA or any(v is not None for v in values):
        return values
    v = entry.get("value")
    if isinstance(v, torch.Tensor):
        return [v]
    return [x for x in v if isinstance(x, torch.Tensor)] if isinstance(v, (list, tuple)) else []



# NOTE [Earlier graphs not walked]
# A freed-graph failure asks of each tensor of the failing frame whether an earlier backward went through its node
# (the carrier or the shared part is then that tensor). The graphs are known only of the earlier backward calls
# whose roots are still alive (their nodes are walked again); a root the program rebound (``loss`` of the previous
# iteration, ``ploss`` of a probe loop) is gone. So "no" is an answer only where no backward with gone roots ran
# after the node was built (its ``seq_now`` above the node's sequence nr): else the answer is unknown (None) and the
# reader falls back on the sequence nrs (built before the freeing backward). Seen on a real program: a linear probe
# trained on features computed once from a ViT encoder, after the ViT's own training loop whose last ``loss`` lived
# on: the features' node was in no live root's graph, was taken for "not in an earlier graph", and the culprit fell
# to the loss line with a truncated-BPTT fix.


def _in_earlier(seq, earlier_nodes, unwalked) -> bool | None:
    """Whether an earlier backward went through node ``seq`` (None: cannot say). NOTE [Earlier graphs not walked]."""
    if seq in earlier_nodes:
        return True
    if not earlier_nodes or any(s is None or s > seq for s in unwalked):
        return None
    return False


class FailureGraph:
    """The failure-path readers of a backward's graph, for one run."""

    def __init__(self, rec):
        self.rec = rec  # the run's Tracker

    # --- the version-error failure path without hooks (see NOTE [Stale saved variable without hooks])

    def stale_facts(self, roots, message):
        """(saved-failure facts, plain graph) of a backward that raised the version error."""
        nodes, truncated = stale.walk(roots, message)
        pick = stale.choose_stale(nodes, message)
        if pick is None and not stale.is_version_error(message):
            pick = self._detached(nodes)
        facts = None
        if pick is not None:
            seq, entry = pick
            now, expected = stale.versions(entry["error"])
            t = self._stale_tensor(entry, message, nodes[seq]["node"])
            tf = stale.tensor_facts(t) if t is not None else None
            tid = self._saved_tid(t, tf, seq)
            rec = self.rec
            if rec.saved_failure is not None:
                tid = rec.saved_failure.get("tensor") or tid
            file, line = rec.node_line(seq)
            facts = {"tensor": tid, "version_at_save": expected, "version_now": now,
                     "saved_file": file, "saved_line": line, "node": nodes[seq]["name"],
                     "writes": self._writes_on(tf, seq, expected, now) if tf else [], "silent": [],
                     "names": rec.tensor_names.get(tid, []) if tid else [], "from": "graph"}
        return facts, self._graph(nodes, pick, truncated, roots, facts)

    def _stale_tensor(self, entry, message, node=None):
        """The stale saved tensor: read off the saved variable, else (torch before 2.10, see NOTE [Reading
        a saved tensor without its checks] in compat.py) the live tensor the error text describes."""
        t = stale.stale_tensor(entry, message)
        if t is None and not compat.CAN_READ_SAVED_DATA:
            t = stale.named_by_error(entry["error"] or message, self.rec.live_tensors(), node)
        return t

    def _detached(self, nodes):
        """The saved input that a logged ``detach_()`` reached after its node was built (PyTorch's getter
        unpacks it without complaint: only backward's own unpack raises), latest node first."""
        log = self.rec.write_log
        for seq in sorted(nodes, reverse=True):
            for e in nodes[seq]["saved"]:
                for t in _saved_values(e):
                    if t is None or t.grad_fn is not None or t.requires_grad:
                        continue
                    tf = stale.tensor_facts(t)
                    if tf is None:
                        continue
                    for w in map(LoggedWrite._make, log.get(tf[0], [])):
                        if w.op == "detach_" and w.sequence_nr > seq:
                            e["stale"] = True
                            return seq, e
        return None

    def _saved_tid(self, t, tf, seq, own=True):
        """The program's own tensor behind a saved variable: the saved input itself, or the tensor
        on the same bytes whose grad_fn is the saving node (a saved output). ``own``: ``t`` came
        from ``_raw_saved_x.data`` (an input is then the program's tensor itself)."""
        if t is None or tf is None:
            return None
        rec = self.rec
        known = rec.known_tid(t)
        if known is not None:
            return known
        key, rng, _ = tf
        same = []
        for other in rec.tensors_on_storage(key):
            if _byte_range(other) == rng:
                same.append(other)
        for other in same:
            try:
                gf = other.grad_fn
                if gf is not None and gf._sequence_nr() == seq:
                    return rec.note_tensor(other)
            except Exception:
                continue
        if own and t.requires_grad:
            return rec.note_tensor(t)  # an input is saved as the tensor itself
        return rec.note_tensor(same[-1]) if same else None

    def _writes_on(self, tf, seq, expected, now):
        """The logged writes into the saved tensor's storage after node ``seq`` was built, that moved
        the version on from ``expected`` (the culprit is the one whose version_before is ``expected``)."""
        key = tf[0]
        out = []
        for w in map(LoggedWrite._make, self.rec.write_log.get(key, [])):
            v0, code = w.version_before, w.code
            if w.sequence_nr <= seq or w.version_after == v0:
                continue
            if expected is not None and v0 < expected or now is not None and v0 >= now:
                continue
            segment = call_segment(_Where(code, w.lasti)) if code is not None else None
            library = library_name(_Where(w.library_code, 0)) if w.library_code is not None else None
            out.append(write_facts(w.op, code.co_filename if code is not None else None, w.line, segment,
                                   receiver(segment, w.op) if library is None else segment, library,
                                   v0, w.version_after, w.grad_enabled, w.tensor, True))
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
            file, line = self.rec.node_line(seq)
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
                t = self._stale_tensor(e, e["error"], n["node"])
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
        rec = self.rec
        if tid is not None:
            facts = rec.tensor_facts.get(tid)
            return facts.storage if facts is not None else None
        if tf is None or not rec.tensors_on_storage(tf[0]):
            return None
        return rec.known_storage(tf[0])

    def freed_facts(self, roots, uf, earlier):
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
            unwalked = []  # seq_now of the earlier backwards whose roots are gone: NOTE [Earlier graphs not walked]
            live = self.rec.live_tensors() if earlier else {}
            for i, b in enumerate(earlier):
                if b.get("retain_graph"):
                    continue
                ts = [live.get(r.get("tensor")) for r in b.get("roots") or []]
                ts = [t for t in ts if t is not None and t.grad_fn is not None]
                if not ts:
                    unwalked.append(b.get("seq_now"))
                    continue
                seen = {}
                _walk([t.grad_fn for t in ts], seen, budget, probe=False)
                for s in freed_set.intersection(seen):
                    freed_by.setdefault(s, i)
                earlier_nodes.update(seen)
            local = []
            items = list(peek_locals(uf).items()) if uf is not None else []
            for name, v in items:
                if not isinstance(v, _Tensor) or name.startswith("__"):
                    continue
                gf = v.grad_fn
                if gf is None:
                    continue
                seq = gf._sequence_nr()
                mine = {}
                _walk([gf], mine, budget, probe=False, stop=freed_set)
                leaves = []
                if seq in nodes and freed_set & set(mine):  # the leaves under a tensor both graphs share
                    leaves = [self.rec.tid(t) for t in _leaves_in_order([v], _MAX_SHARED_LEAVES, {})]
                local.append({"name": name, "tensor": self.rec.note_tensor(v), "seq": seq, "node": node_name(gf),
                              "in_failing_graph": seq in nodes, "reaches_freed": bool(freed_set & set(mine)),
                              "in_earlier_graph": _in_earlier(seq, earlier_nodes, unwalked),
                              "leaves": leaves})
                if len(local) >= 64:
                    break
            return {"freed": [{"seq": s, "node": nodes[s]["node"], "freed_by": freed_by.get(s)} for s in freed[:64]],
                    "nodes": len(nodes), "min_seq": min(nodes) if nodes else None, "locals": local}
        except Exception:
            return None
        finally:
            state.recorder = prev


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
