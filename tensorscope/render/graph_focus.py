"""Which part of a big autograd graph to show first: the path backward() takes from the root down to
the node whose saved tensor went stale, with the runs of nodes in between that say nothing folded.

Plain data in (a finding's ``graph``), plain data out; html_graph.py draws it.
See NOTE [The stale node first].
"""

from __future__ import annotations

from collections import Counter, deque
from typing import NamedTuple

# NOTE [The stale node first]
# On a real model the report's graph holds a few hundred nodes (it keeps the ~200 nearest the stale
# one), and whatever layout draws them, the stale node is far from the top of the page. So the
# section starts with the one path that explains the failure: the shortest path along autograd's
# edges from the root (or, when the report's graph was cut above, from the highest node it kept)
# down to the stale node. A node on that path is shown when it says something: the start, the stale
# node and the node just above it (the one whose backward hands it its gradient), any other node
# holding a stale saved tensor, and any node built on a line the finding names. Two or more other
# nodes in a row are folded into one box that counts them by name ("12 nodes: AddmmBackward0 x4,
# ..."), which opens to show them. Below the stale node come the nodes its gradient flows on to.
# The full graph follows, folded when large.

SMALL = 15  # a graph this small is drawn whole and open, with no path above it
_SHOWN_NAMES = 4


class Focus(NamedTuple):
    target: str  # the node holding the stale saved tensor the finding is about
    start: str  # where the path starts: the root, or the highest node kept of a cut graph
    from_root: bool  # the start is the backward's root
    steps: list  # [("node", id) | ("run", [id, ...])], from start down to target
    below: list  # the nodes target's gradient flows on to (its ``next``)
    other_stale: list  # other nodes holding a stale saved tensor


def stale_nodes(graph: dict, tensor: str | None = None) -> list[str]:
    """Ids of the nodes holding a stale saved tensor, the one saving TENSOR first."""
    nodes = graph.get("nodes") or []
    out = [n["id"] for n in nodes if any(s.get("stale") for s in n.get("saved") or [])]
    return sorted(out, key=lambda nid: not any(
        s.get("stale") and s.get("tensor") == tensor for n in nodes if n["id"] == nid for s in n.get("saved") or []))


def focus(graph: dict, tensor: str | None = None, lines: set | None = None,
          saving: tuple | None = None) -> Focus | None:
    """The path to show first (see NOTE [The stale node first]), or None when no node is known to
    have failed or the graph is small enough to show whole. LINES: ``(file, line)`` pairs the
    finding names (culprit, saving line, backward). SAVING: the saving line's ``(file, line)``,
    whose node is the one shown when none holds a stale saved tensor."""
    nodes = graph.get("nodes") or []
    targets = stale_nodes(graph, tensor)
    if not targets and saving and saving[1]:
        targets = [n["id"] for n in nodes if (n.get("file"), n.get("line")) == tuple(saving)][:1]
    if len(nodes) <= SMALL or not targets:
        return None
    target = targets[0]
    by_id = {n["id"]: n for n in nodes}
    nxt = {n["id"]: [m for m in n.get("next") or [] if m in by_id and m != n["id"]] for n in nodes}
    parents: dict = {nid: [] for nid in by_id}
    for nid, ms in nxt.items():
        for m in ms:
            parents[m].append(nid)
    root = graph.get("root") if graph.get("root") in by_id else None
    path = _shortest_path(root, target, nxt) if root else None
    if path is None:
        # cut above: start from the highest kept node that reaches the target (the one built last)
        above = _ancestors(target, parents)
        tops = [nid for nid in above if not parents[nid]] or [target]
        start = max(tops, key=lambda nid: (by_id[nid].get("seq_nr") or -1, -_order(nodes, nid)))
        path = _shortest_path(start, target, nxt) or [target]
    lines = lines or set()
    keep = {path[0], path[-1]} | ({path[-2]} if len(path) > 1 else set())
    keep |= {nid for nid in path if nid in targets
             or (by_id[nid].get("line") and (by_id[nid].get("file"), by_id[nid]["line"]) in lines)}
    steps: list = []
    run: list = []
    for nid in path:
        if nid in keep:
            steps += _flush(run)
            run = []
            steps.append(("node", nid))
        else:
            run.append(nid)
    steps += _flush(run)
    return Focus(target, path[0], path[0] == root, steps, nxt[target], targets[1:])


def run_summary(names: list[str]) -> str:
    """``"12 nodes: AddmmBackward0 x4, ViewBackward0 x3, ..."`` for a folded run."""
    counts = Counter(names).most_common()
    shown = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counts[:_SHOWN_NAMES])
    more = f", {len(counts) - _SHOWN_NAMES} more kinds" if len(counts) > _SHOWN_NAMES else ""
    return f"{len(names)} nodes: {shown}{more}"


def _flush(run: list) -> list:
    if len(run) >= 2:
        return [("run", list(run))]
    return [("node", nid) for nid in run]


def _order(nodes: list, nid: str) -> int:
    return next(i for i, n in enumerate(nodes) if n["id"] == nid)


def _shortest_path(start: str, end: str, nxt: dict) -> list | None:
    came: dict = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if v == end:
            path = []
            while v is not None:
                path.append(v)
                v = came[v]
            return path[::-1]
        for w in nxt[v]:
            if w not in came:
                came[w] = v
                queue.append(w)
    return None


def _ancestors(target: str, parents: dict) -> list:
    seen = {target}
    queue = deque([target])
    while queue:
        for p in parents[queue.popleft()]:
            if p not in seen:
                seen.add(p)
                queue.append(p)
    return sorted(seen)
