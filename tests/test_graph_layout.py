"""The HTML graph's pieces on hand-built graphs, in this process (no subprocess, no browser): the
layered layout's geometry, text wrapping that never drops a character, and the path shown first.
tests/test_html_report.py checks the same on a real GPT-2-size failure, in Chromium."""

from __future__ import annotations

import random

from tensorscope.render.graph_focus import focus, run_summary
from tensorscope.render.graph_layout import GAP_Y, layered
from tensorscope.render.html_graph import cols, wrap


def _random_dag(seed: int, n: int):
    rng = random.Random(seed)
    nodes = [(f"v{i}", rng.randrange(150, 420), rng.choice((44, 60, 76, 108))) for i in range(n)]
    edges = []
    for i in range(n - 1):
        for j in rng.sample(range(i + 1, n), min(rng.choice((1, 1, 2, 3)), n - i - 1)):
            edges.append((f"v{i}", f"v{j}"))
    return nodes, edges


def _check_geometry(lay, edges):
    boxes = lay.boxes
    ids = sorted(boxes)
    for i, a in enumerate(ids):  # no two boxes overlap
        for b in ids[i + 1:]:
            (ax, ay, aw, ah), (bx, by, bw, bh) = boxes[a], boxes[b]
            assert ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay, (a, b)
    assert {(a, b) for a, b, _ in lay.edges} == set(edges)
    for a, b, pts in lay.edges:
        (ax, ay, aw, ah), (bx, by, _, _) = boxes[a], boxes[b]
        assert by >= ay + ah + GAP_Y  # every edge goes down, a gap at least
        assert pts[0][1] == ay + ah and ax <= pts[0][0] <= ax + aw  # leaves its box at the bottom
        assert pts[-1][1] == by and bx <= pts[-1][0] <= bx + boxes[b][2]  # enters the other at the top
        # the drawn path: straight down inside a band, a curve across a gap with no box in it
        for k in range(1, len(pts)):
            (x1, y1), (x2, y2) = pts[k - 1], pts[k]
            assert y2 >= y1
            others = [boxes[v] for v in ids if v not in (a, b)]
            if k % 2:
                assert x1 == x2
                assert not [o for o in others if o[0] < x1 < o[0] + o[2] and o[1] < y2 and y1 < o[1] + o[3]]
            else:
                assert not [o for o in others if o[1] < y2 and y1 < o[1] + o[3]]


def test_layered_layout_geometry_on_random_graphs():
    for seed, n in ((0, 12), (1, 40), (2, 80)):
        nodes, edges = _random_dag(seed, n)
        lay = layered(nodes, edges)
        assert {v for v, _, _ in nodes} == set(lay.boxes)
        _check_geometry(lay, edges)
        assert lay.width >= max(x + w for x, _, w, _ in lay.boxes.values())
        assert lay.height >= max(y + h for _, y, _, h in lay.boxes.values())


def test_a_tree_is_drawn_without_crossings():
    rng = random.Random(3)
    parent = {f"v{i}": f"v{rng.randrange(i)}" for i in range(1, 60)}
    nodes = [(f"v{i}", 160, 44) for i in range(60)]
    edges = [(p, c) for c, p in parent.items()]
    lay = layered(nodes, edges)
    _check_geometry(lay, edges)
    x = {v: b[0] for v, b in lay.boxes.items()}
    for a, b in edges:  # a tree: each edge joins two neighbouring layers, and no two edges cross
        for c, d in edges:
            if lay.boxes[a][1] == lay.boxes[c][1] and a != c:
                assert (x[a] < x[c]) == (x[b] < x[d]), (a, b, c, d)


def test_layout_survives_what_autograd_never_makes():
    # a cycle, a self-loop, an edge to a node that is not there, a duplicate edge
    nodes = [("a", 200, 44), ("b", 200, 44), ("c", 200, 60)]
    lay = layered(nodes, [("a", "b"), ("b", "c"), ("c", "a"), ("a", "a"), ("a", "zz"), ("a", "b")])
    assert set(lay.boxes) == {"a", "b", "c"} and len(lay.edges) == 3
    assert layered([], []).boxes == {}


def test_wrap_keeps_every_character():
    texts = ["attn_weights = attn_weights.masked_fill(~self.causal[:t, :t], float('-inf'))  # a comment",
             "x" * 130, "权重 = 模型.前向(输入张量, 注意力掩码)  " * 3, "\tindented\twith tabs", "", "short"]
    for text in texts:
        for width in (52, 20, 7):
            lines = wrap(text, width)
            assert "".join(lines) == text.expandtabs(4)
            assert all(cols(line) <= width for line in lines) and all(lines[:-1])
    assert wrap("a b c", 52) == ["a b c"]
    assert cols("权重") == 4


def _node(nid, name, nxt, line=None, stale=False):
    saved = [{"name": "result", "tensor": "t9", "version_at_save": 0, "version_now": 1, "stale": True}] if stale else []
    return {"id": nid, "name": name, "seq_nr": 100 - int(nid[1:]), "next": nxt, "file": "p.py" if line else None,
            "line": line, "saved": saved}


def test_focus_folds_the_runs_between_what_matters():
    # root n0 -> n1 -> ... -> n29 (stale, saved by line 5) -> n30; n12 was built on the culprit line;
    # a side branch n0 -> n40 -> n41 -> n29 is longer than nothing but not shorter than the chain
    names = ["AddBackward0", "ViewBackward0", "AddmmBackward0"]
    nodes = [_node(f"n{i}", names[i % 3], [f"n{i + 1}"], line=9 if i == 12 else None) for i in range(29)]
    nodes.append(_node("n29", "SoftmaxBackward0", ["n30"], line=5, stale=True))
    nodes.append(_node("n30", "MaskedFillBackward0", []))
    nodes[0]["next"].append("n40")
    nodes += [_node("n40", "MulBackward0", ["n41"]), _node("n41", "MulBackward0", [])]
    graph = {"root": "n0", "truncated": False, "nodes": nodes}
    f = focus(graph, "t9", {("p.py", 9)})
    assert f.target == "n29" and f.start == "n0" and f.from_root and f.below == ["n30"]
    shown = [what for kind, what in f.steps if kind == "node"]
    assert shown == ["n0", "n12", "n28", "n29"]
    runs = [what for kind, what in f.steps if kind == "run"]
    assert runs == [[f"n{i}" for i in range(1, 12)], [f"n{i}" for i in range(13, 28)]]
    assert (run_summary([n["name"] for n in nodes[1:12]])
            == "11 nodes: ViewBackward0 x4, AddmmBackward0 x4, AddBackward0 x3")
    # cut above: the path starts at the highest node kept that reaches the stale one
    cut = {"root": None, "truncated": True, "nodes": nodes[5:]}
    f = focus(cut, "t9")
    assert f.start == "n5" and not f.from_root and f.steps[0] == ("node", "n5")
    # no stale saved tensor: the node built on the saving line; a small graph: no path, the whole graph
    for n in nodes:
        n["saved"] = []
    assert focus(graph, None, set(), ("p.py", 5)).target == "n29"
    assert focus(graph, None, set()) is None
    assert focus({"root": "n0", "nodes": nodes[25:]}, None, set(), ("p.py", 5)) is None
