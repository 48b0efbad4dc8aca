"""Where a new graph takes in a tensor of an older one (the failure path of backward-twice).

NOTE [Links into a freed graph]
Autograd numbers graph nodes in creation order (``_sequence_nr``), and every backward call
records the next number at its start (``seq_now``). When a backward fails because an earlier
backward freed part of its graph, the failing graph is walked from its roots: an edge from a
node built after the last earlier backward to a node built before it is a *link*, the op that
took a tensor of the freed graph into the new one (an RNN state carried into the next step,
a running sum of losses, an intermediate reused after its graph was freed). The link's forward
line is read where autograd saw it (a pack hook under explain, else the events recorded around
its creation, see Tracker.node_line); nothing is guessed from the source.
"""

from __future__ import annotations

from tensorscope.instrument import state
from tensorscope.instrument.recorder import node_name

MAX_WALK = 20_000
MAX_LINKS = 8


def find(roots, earlier: list[dict], node_line) -> list[dict]:
    """Links of the graph of ``roots`` into nodes built before the last of the ``earlier`` backward
    calls: ``[{seq, node, file, line, from_seq, from_node, from_file, from_line}]`` by sequence nr."""
    horizons = [b.get("seq_now") for b in earlier if b.get("seq_now") is not None]
    if not horizons:
        return []
    horizon = max(horizons)
    prev = state.recorder
    state.recorder = None  # reading node attributes must not reach our own bookkeeping
    try:
        return _walk(roots, horizon, node_line)
    except Exception:
        return []
    finally:
        state.recorder = prev


def _seq(node):
    if node is None or hasattr(node, "variable"):  # AccumulateGrad: a leaf, not part of any one graph
        return None
    return node._sequence_nr()


def _walk(roots, horizon, node_line):
    stack = [r.grad_fn for r in roots if r.grad_fn is not None]
    seen = set()
    found = {}
    used_by = {}  # seq -> seq of the node (nearer the roots) that the walk reached it from
    budget = MAX_WALK
    while stack and budget > 0:
        node = stack.pop()
        budget -= 1
        seq = _seq(node)
        if seq is None or seq in seen or seq < horizon:
            continue
        seen.add(seq)
        for nxt, _ in node.next_functions:
            nseq = _seq(nxt)
            if nseq is None:
                continue
            if nseq < horizon:
                found.setdefault(seq, (node, nxt, nseq))
            else:
                used_by.setdefault(nseq, seq)
                stack.append(nxt)
    out = []
    for seq in sorted(found)[:MAX_LINKS]:
        node, old, oseq = found[seq]
        file, line = node_line(seq)
        user = seq
        for _ in range(16):  # a node that saved nothing (a view, an add): the line of the op that used it
            if line is not None or user not in used_by:
                break
            user = used_by[user]
            file, line = node_line(user)
        ofile, oline = node_line(oseq)
        out.append({"seq": seq, "node": node_name(node), "file": file, "line": line,
                    "from_seq": oseq, "from_node": node_name(old), "from_file": ofile, "from_line": oline})
    return out
