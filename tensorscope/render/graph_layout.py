"""A layered drawing of a directed graph: where each box goes and where each edge runs.

Plain data in (ids, edges, box sizes), coordinates out; no drawing and no third-party code.
See NOTE [Layered layout of the autograd graph].

Example::

    >>> lay = layered([("a", 100, 40), ("b", 100, 40)], [("a", "b")])
    >>> lay.boxes["a"][1] < lay.boxes["b"][1]
    True
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

# NOTE [Layered layout of the autograd graph]
# The classic Sugiyama steps, each kept simple:
#  1. cycles (never made by autograd, but a document is untrusted) are broken by turning back the
#     edges a depth-first walk finds going up;
#  2. longest-path layering: a node sits one layer below its lowest parent, so every edge points
#     down; a node with no parent (the root, or a node whose parents were cut from the report) is
#     then pulled down to just above its highest child, so cut-off branches do not hang from the top;
#  3. an edge spanning several layers gets one narrow dummy node per layer it crosses: the edge is
#     routed through those slots, so it passes between boxes and never through one;
#  4. crossing reduction: layers are re-ordered by the barycentre of their neighbours, sweeping down
#     and up, and the order with the fewest crossings is kept;
#  5. x coordinates: each node wants the mean x of its neighbours; within a layer the order is fixed
#     and boxes may not overlap, and the closest placement to those wishes (least squares) is an
#     isotonic regression, solved exactly by pooling adjacent violators.
# Edges leave a box at the bottom of its layer's band and enter the next box at its top, with a
# vertical tangent at both ends: between two bands a curve stays in the gap, where there are no
# boxes, and inside a band it runs straight down a dummy's slot.

GAP_X = 28
GAP_Y = 44
DUMMY_W = 14
MARGIN = 12
_SWEEPS = 12


class Layout(NamedTuple):
    boxes: dict  # id -> (x, y, width, height)
    edges: list  # (from, to, [(x, y), ...]): the points an edge passes, top to bottom
    width: float
    height: float
    layers: list  # the ids of each layer, left to right (real nodes only)


def layered(nodes: list, edges: list) -> Layout:
    """Lay out NODES, ``[(id, width, height)]`` in a stable order, joined by EDGES ``[(from, to)]``
    (from above to): boxes in layers from the top, edges as polylines through the gaps."""
    ids = [n for n, _, _ in nodes]
    size = {n: (w, h) for n, w, h in nodes}
    known = set(ids)
    edges = list(dict.fromkeys((a, b) for a, b in edges if a in known and b in known and a != b))
    edges = _acyclic(ids, edges)
    layer = _layers(ids, edges)
    order, slots, chains = _with_dummies(ids, edges, layer)
    order = _reduce_crossings(order, slots)
    width_of = {v: size[v][0] if v in size else DUMMY_W for layer_ in order for v in layer_}
    xs = _place_x(order, slots, width_of)
    _straighten(order, chains, xs, width_of)
    # y: each layer is a band as tall as its tallest box; boxes hang from the top of their band
    band_top, band_h = [], []
    y = MARGIN
    for layer_ in order:
        h = max((size[v][1] for v in layer_ if v in size), default=0)
        band_top.append(y)
        band_h.append(h)
        y += h + GAP_Y
    boxes = {}
    for i, layer_ in enumerate(order):
        for v in layer_:
            if v in size:
                w, h = size[v]
                boxes[v] = (xs[v] - w / 2, band_top[i], w, h)
    out_edges = []
    for (a, b), chain in chains.items():
        pts = [(xs[a], boxes[a][1] + boxes[a][3]), (xs[a], band_top[layer[a]] + band_h[layer[a]])]
        for i, d in enumerate(chain, start=layer[a] + 1):
            pts += [(xs[d], band_top[i]), (xs[d], band_top[i] + band_h[i])]
        pts.append((xs[b], boxes[b][1]))
        out_edges.append((a, b, pts))
    _spread_ports(out_edges, boxes)
    right = max((x + w for x, _, w, _ in boxes.values()), default=0)
    right = max([right] + [xs[v] + DUMMY_W / 2 for layer_ in order for v in layer_])
    height = (band_top[-1] + band_h[-1]) if order else 0
    real = [[v for v in layer_ if v in size] for layer_ in order]
    return Layout(boxes, out_edges, right + MARGIN, height + MARGIN, [r for r in real if r])


def _acyclic(ids: list, edges: list) -> list:
    """EDGES with each edge that closes a cycle turned back (iterative depth-first walk)."""
    succ: dict = {v: [] for v in ids}
    for a, b in edges:
        succ[a].append(b)
    state: dict = {}  # 1: on the walk's stack, 2: done
    back = set()
    for start in ids:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(succ[start]))]
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[v] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                back.add((v, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    out = [(b, a) if (a, b) in back else (a, b) for a, b in edges]
    return list(dict.fromkeys(out))


def _layers(ids: list, edges: list) -> dict:
    """Longest-path layering (step 2 of the NOTE), then layers renumbered without gaps."""
    preds: dict = {v: [] for v in ids}
    succ: dict = {v: [] for v in ids}
    for a, b in edges:
        succ[a].append(b)
        preds[b].append(a)
    indeg = {v: len(preds[v]) for v in ids}
    topo = [v for v in ids if not indeg[v]]
    for v in topo:  # grows while read: Kahn's algorithm in a stable order
        for w in succ[v]:
            indeg[w] -= 1
            if not indeg[w]:
                topo.append(w)
    layer = {}
    for v in topo:
        layer[v] = max((layer[p] + 1 for p in preds[v]), default=0)
    for v in reversed(topo):  # parentless nodes sit just above their highest child
        if not preds[v] and succ[v]:
            layer[v] = min(layer[w] for w in succ[v]) - 1
    used = sorted(set(layer.values()))
    renumber = {old: new for new, old in enumerate(used)}
    return {v: renumber[layer[v]] for v in ids}


def _with_dummies(ids: list, edges: list, layer: dict):
    """Layers (lists of ids, dummies included), each slot's neighbours above and below, and for each
    edge the dummies it passes through."""
    order: list = [[] for _ in range(max(layer.values(), default=-1) + 1)]
    for v in ids:
        order[layer[v]].append(v)
    up: dict = {v: [] for v in ids}
    down: dict = {v: [] for v in ids}
    chains: dict = {}
    for k, (a, b) in enumerate(edges):
        chain = []
        prev = a
        for i in range(layer[a] + 1, layer[b]):
            d = ("dummy", k, i)
            order[i].append(d)
            layer[d] = i
            up[d], down[d] = [prev], []
            down[prev].append(d)
            chain.append(d)
            prev = d
        down[prev].append(b)
        up[b].append(prev)
        chains[(a, b)] = chain
    # start from a depth-first order from the top: subtrees stay together
    pos: dict = {}
    for v in ids:
        if v not in pos and not up[v]:
            stack = [v]
            while stack:
                u = stack.pop()
                if u in pos:
                    continue
                pos[u] = len(pos)
                stack.extend(reversed(down[u]))
    for layer_ in order:
        layer_.sort(key=lambda v: pos.get(v, len(pos)))
    return order, {"up": up, "down": down}, chains


def _crossings(upper: list, lower: list, up: dict) -> int:
    """Crossings between two layers: inversions among the upper ends of the edges taken in the
    lower layer's order (the upper ends of one node's edges in their own order)."""
    at = {v: i for i, v in enumerate(upper)}
    seen: list = []
    count = 0
    for v in lower:
        ends = sorted(at[p] for p in up[v] if p in at)
        for e in ends:
            count += len(seen) - bisect.bisect_right(seen, e)
        for e in ends:
            bisect.insort(seen, e)
    return count


def _total_crossings(order: list, up: dict) -> int:
    return sum(_crossings(order[i - 1], order[i], up) for i in range(1, len(order)))


def _reduce_crossings(order: list, slots: dict) -> list:
    up, down = slots["up"], slots["down"]
    best, best_count = [list(layer_) for layer_ in order], _total_crossings(order, up)
    for sweep in range(_SWEEPS):
        going_down = sweep % 2 == 0
        rng = range(1, len(order)) if going_down else range(len(order) - 2, -1, -1)
        for i in rng:
            ref = order[i - 1] if going_down else order[i + 1]
            at = {v: k for k, v in enumerate(ref)}
            nbrs = up if going_down else down
            current = {v: k for k, v in enumerate(order[i])}

            def key(v, at=at, nbrs=nbrs, current=current):
                ks = [at[n] for n in nbrs[v] if n in at]
                return (sum(ks) / len(ks) if ks else current[v] * len(ref) / max(1, len(order[i])), current[v])

            order[i] = sorted(order[i], key=key)
        count = _total_crossings(order, up)
        if count < best_count:
            best, best_count = [list(layer_) for layer_ in order], count
        if not best_count:
            break
    return best


def _place_x(order: list, slots: dict, width_of: dict) -> dict:
    """x of each slot's centre (step 5 of the NOTE)."""
    xs: dict = {}
    for layer_ in order:
        x = MARGIN
        for v in layer_:
            xs[v] = x + width_of[v] / 2
            x += width_of[v] + GAP_X
    up, down = slots["up"], slots["down"]
    for sweep in range(8):
        rng = range(len(order)) if sweep % 2 == 0 else range(len(order) - 1, -1, -1)
        for i in rng:
            layer_ = order[i]
            wish = []
            for v in layer_:
                nbrs = up[v] + down[v]
                wish.append(sum(xs[n] for n in nbrs) / len(nbrs) if nbrs else xs[v])
            for v, x in zip(layer_, _isotonic(wish, [width_of[v] for v in layer_])):
                xs[v] = x
    left = min((xs[v] - width_of[v] / 2 for layer_ in order for v in layer_), default=MARGIN)
    return {v: x - left + MARGIN for v, x in xs.items()}


def _straighten(order: list, chains: dict, xs: dict, width_of: dict) -> None:
    """Move the dummies of each long edge onto one vertical line (their median x) where the
    neighbours in their layers leave room, so the edge runs straight instead of weaving."""
    at = {v: (i, k) for i, layer_ in enumerate(order) for k, v in enumerate(layer_)}
    for chain in chains.values():
        if len(chain) < 2:
            continue
        line = sorted(xs[d] for d in chain)[len(chain) // 2]
        for d in chain:
            i, k = at[d]
            layer_ = order[i]
            lo = xs[layer_[k - 1]] + (width_of[layer_[k - 1]] + width_of[d]) / 2 + GAP_X if k else MARGIN + width_of[d] / 2
            hi = (xs[layer_[k + 1]] - (width_of[layer_[k + 1]] + width_of[d]) / 2 - GAP_X
                  if k + 1 < len(layer_) else float("inf"))
            if lo <= line <= hi:
                xs[d] = line


def _isotonic(wish: list, widths: list) -> list:
    """Centres as close to WISH as possible (least squares) keeping order and GAP_X between boxes."""
    offset = [0.0]
    for a, b in zip(widths, widths[1:]):
        offset.append(offset[-1] + (a + b) / 2 + GAP_X)
    # x_i = y_i + offset_i with y non-decreasing: fit y to wish_i - offset_i by pooling violators
    blocks: list = []  # [sum, count]
    for w, off in zip(wish, offset):
        blocks.append([w - off, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out = []
    for s, c in blocks:
        out += [s / c] * c
    return [y + off for y, off in zip(out, offset)]


def _spread_ports(edges: list, boxes: dict) -> None:
    """Several edges leaving (or entering) one box leave from points spread along its side, in the
    left-to-right order of their other ends, instead of one point."""
    for end, other in ((0, 2), (-1, -2)):
        by_box: dict = {}
        for e in edges:
            by_box.setdefault(e[0] if end == 0 else e[1], []).append(e)
        for v, es in by_box.items():
            if len(es) < 2:
                continue
            x, _, w, _ = boxes[v]
            es.sort(key=lambda e: e[2][other][0])
            for k, e in enumerate(es):
                px = x + w * (k + 1) / (len(es) + 1)
                pts = e[2]
                if end == 0:
                    pts[0] = (px, pts[0][1])
                    pts[1] = (px, pts[1][1])
                else:
                    pts[-1] = (px, pts[-1][1])
