"""The HTML report (`-o report.html`): real CLI runs and a hand-built failure with an autograd
graph, loaded in a real headless Chromium whose DOM is checked and whose screenshot is taken; a
GPT-2-size failure whose graph is checked against torch's own and measured in the browser.

Browser tests skip cleanly without Chromium. Facts about tensors (shared storage, byte ranges,
version counters, stride 0) and about the autograd graph (nodes, edges, the stale saved tensor) are
computed here with torch, never taken from tensorscope.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

try:
    from _browser import WINDOW, load, measure, needs_browser, parse, png_facts
    from _cli import REPO, SNIPPETS_DIR, line_of, run_cli, run_python
except ImportError:  # tests/ became a package
    from tests._browser import WINDOW, load, measure, needs_browser, parse, png_facts
    from tests._cli import REPO, SNIPPETS_DIR, line_of, run_cli, run_python

from tensorscope.render import form_for_path, render
from tensorscope.render.html import render_html

VIEW_WRITE = "snippets/view_write_before_matmul_backward.py"
EXPAND = "snippets/expand_stride_zero.py"
HOSTILE = "<script>alert(\"x\")</script> 'q' [b] & <img src=x onerror=alert(1)>"


# -- a failure with an autograd graph, built by hand (program p.py, one line per statement) ------
#   3 x = torch.ones(3, requires_grad=True)
#   4 y = x.sigmoid()                      SigmoidBackward0 saves its result y
#   5 v = y[:2]                            a view of y
#   6 v.mul_(2)                            writes y through v
#   7 loss = y.sum() + x.exp().sum()
#   8 loss.backward()
def _tensor(tid, names, rng, **kw):
    t = {"id": tid, "names": names, "alive": True, "shape": [3], "stride": [1], "dtype": "float32",
         "device": "cpu", "storage": "s1", "storage_offset": 0, "data_ptr": 1000, "nbytes": 12,
         "byte_range": rng, "view_of": None, "version": 0, "version_counter": "v1", "requires_grad": True,
         "is_leaf": False, "grad_fn": None, "has_grad": None, "created": None}
    t.update(kw)
    return t


def _event(seq, line, code, kind, **kw):
    return {"seq": seq, "kind": kind, "file": "p.py", "line": line, "code": code, **kw}


def _place(line, code, **kw):
    return {"file": "p.py", "line": line, "code": code, **kw}


def _node(nid, name, seq_nr, nxt, line, saved=()):
    return {"id": nid, "name": name, "seq_nr": seq_nr, "next": nxt, "file": "p.py" if line else None,
            "line": line, "saved": list(saved)}


def _saved(name, tid, sid, at, now, stale):
    return {"name": name, "tensor": tid, "storage": sid, "version_at_save": at, "version_now": now, "stale": stale}


GRAPH = {"root": "n1", "truncated": False, "nodes": [
    _node("n1", "AddBackward0", 9, ["n2", "n4"], 7),
    _node("n2", "SumBackward0", 7, ["n3"], 7),
    _node("n3", "SigmoidBackward0", 5, ["n6"], 4, [_saved("result", "t2", "s2", 0, 1, True)]),
    _node("n4", "SumBackward0", 8, ["n5"], 7),
    _node("n5", "ExpBackward0", 6, ["n6"], 7, [_saved(HOSTILE, "t5", "s3", 0, 0, False)]),
    _node("n6", "AccumulateGrad", None, [], None),
]}
EDGES = {(n["id"], m) for n in GRAPH["nodes"] for m in n["next"]}

GRAPH_DOC = {
    "schema_version": 1, "tensorscope_version": "0", "torch_version": "2.13.0", "command": "explain",
    "program": {"path": "p.py", "argv": ["p.py"], "exit_status": 1,
                "exception": {"type": "RuntimeError", "message": "one of the variables ...", "file": "p.py", "line": 8}},
    "device_mode": "auto",
    "tensors": [
        _tensor("t1", ["x"], [0, 12], storage="s1", is_leaf=True, has_grad=False),
        _tensor("t2", ["y"], [0, 12], storage="s2", version=1, version_counter="v2", grad_fn="SigmoidBackward0"),
        _tensor("t3", ["v", HOSTILE], [0, 8], storage="s2", shape=[2], version=1, version_counter="v2",
                view_of="t2", grad_fn="AsStridedBackward0"),
        _tensor("t5", ["x.exp()"], [0, 12], storage="s3", version_counter="v3", grad_fn="ExpBackward0"),
    ],
    "storages": [{"id": "s1", "device": "cpu", "nbytes": 12, "data_ptr": 1000, "tensors": ["t1"]},
                 {"id": "s2", "device": "cpu", "nbytes": 12, "data_ptr": 2000, "tensors": ["t2", "t3"]},
                 {"id": "s3", "device": "cpu", "nbytes": 12, "data_ptr": 3000, "tensors": ["t5"]}],
    "version_counters": [{"id": "v1", "tensors": ["t1"]}, {"id": "v2", "tensors": ["t2", "t3"]},
                         {"id": "v3", "tensors": ["t5"]}],
    "events": [
        _event(1, 3, "x = torch.ones(3, requires_grad=True)", "create", op="ones", tensor="t1", requires_grad=True),
        _event(2, 4, "y = x.sigmoid()", "saved", tensor="t2", version=0, output=True),
        _event(3, 5, "v = y[:2]", "alias", op="getitem", tensor="t3", base="t2", shares_version_counter=True),
        _event(4, 6, "v.mul_(2)  " + HOSTILE, "write", op="mul_", tensor="t3", alias="v", names=["v"],
               version_before=0, version_after=1, also_changed=["t2"], also_bumped=["t2"]),
        _event(5, 7, "loss = y.sum() + x.exp().sum()", "saved", tensor="t5", version=0, output=True),
        _event(6, 8, "loss.backward()", "backward", op="backward", roots=["t6"], leaves_with_grad=[], ok=False),
    ],
    "events_summary": {"recorded": 6, "aggregated": 0, "per_site_limit": 20, "max_events": 20000, "sites": []},
    "diagnosis": {
        "kind": "inplace-modified-saved-tensor",
        "title": "A tensor saved for backward was modified in place before backward() used it.",
        "explanation": "`y` was saved by SigmoidBackward0 ... </section><h1>not a heading</h1>",
        "culprit": _place(6, "v.mul_(2)", alias="v"), "saved_by": _place(4, "y = x.sigmoid()", node="SigmoidBackward0"),
        "backward": _place(8, "loss.backward()"),
        "tensor": {"id": "t2", "names": ["y"], "version_at_save": 0, "version_now": 1},
        "other_writes": [],
        "alias_chain": [_place(5, "v = y[:2]", what="`v` = getitem of `y`"),
                        _place(6, "v.mul_(2)", what="writes through `v`: version of `y` 0 -> 1")],
        "fix": "Clone before the write: `v = v.clone()`.",
        "graph": GRAPH,
    },
    "hazards": [], "notes": [],
}


# -- no browser needed ----------------------------------------------------------------------------

def test_output_form_follows_the_extension():
    assert [form_for_path(p) for p in ("r.json", "R.JSON", "r.html", "r.HTM", "r.sarif", "r.txt", "report")] == \
        ["json", "json", "html", "html", "sarif", "text", "text"]


def test_page_is_self_contained_and_escapes_every_user_string():
    page = render(GRAPH_DOC, "html")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing fetched: no scripts, stylesheets, images, fonts or any URL; links stay in the page
    assert "://" not in page and "@import" not in page
    elements = list(parse(page).iter())
    assert not [e.tag for e in elements if e.tag in ("script", "link", "img", "iframe", "object", "image")]
    assert not [e.attrs for e in elements if {"src", "srcset"} & set(e.attrs) or
                any(k.startswith("on") for k in e.attrs)]
    assert all(e.attrs["href"].startswith("#") for e in elements if "href" in e.attrs)
    assert all(re.fullmatch(r"#(hatch-s\d+-t\d+|arrow-\d+)", u) for u in re.findall(r"url\(([^)]*)\)", page))
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &#x27;q&#x27; [b] &amp; &lt;img" in page
    assert "&lt;/section&gt;&lt;h1&gt;not a heading" in page


def test_graph_layout_does_not_depend_on_the_hash_seed():
    # the layout must not follow the order of a set of node ids: the page is the same for any hash seed
    code = "import json,sys; from tensorscope.render import render; sys.stdout.write(render(json.load(sys.stdin), 'html'))"
    pages = set()
    for seed in ("0", "1", "2"):
        proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(GRAPH_DOC), capture_output=True,
                              text=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=900, check=True)
        pages.add(proc.stdout)
    assert len(pages) == 1
    assert render(GRAPH_DOC, "html") in pages


def test_no_graph_section_without_graph_facts():
    doc = copy.deepcopy(GRAPH_DOC)
    doc["diagnosis"]["graph"] = None
    assert 'class="graph"' not in render(doc, "html")


def test_fragment_for_notebooks_scopes_its_styles():
    frag = render_html(GRAPH_DOC, fragment=True)
    assert frag.startswith('<div class="tensorscope"><style>') and "<html" not in frag and "<body" not in frag
    css = frag.split("<style>", 1)[1].split("</style>", 1)[0]
    selectors = [sel.strip() for rule in css.splitlines() for sel in rule.split("{", 1)[0].split(",")]
    assert selectors and all(sel == ".tensorscope" or sel.startswith(".tensorscope ") for sel in selectors)
    assert frag in render_html(GRAPH_DOC)


def test_odd_graphs_render_without_error():
    doc = copy.deepcopy(GRAPH_DOC)
    hazard = copy.deepcopy(doc["diagnosis"])
    hazard["kind"] = "silent-saved-tensor-write"
    # a cycle, an edge to a node that is not there, a self-loop, no root, truncated
    hazard["graph"] = {"root": None, "truncated": True, "nodes": [
        _node("a", "MulBackward0", 1, ["b", "zz", "a"], 3), _node("b", "AddBackward0", 2, ["a"], None)]}
    doc["diagnosis"], doc["hazards"] = None, [hazard]
    page = render_html(doc)
    assert "Autograd graph of the backward that used the changed tensor" in page
    assert page.count('class="node') == 2 and 'class="note truncated"' in page
    doc["hazards"][0]["graph"] = {"root": None, "truncated": False, "nodes": []}
    assert "No nodes were recorded" in render_html(doc)


# -- in a real browser ----------------------------------------------------------------------------

def _box(g):
    r = g.one("rect", "box")
    return tuple(float(r.attrs[k]) for k in ("x", "y", "width", "height"))


@needs_browser
def test_graph_in_the_browser(tmp_path):
    page = tmp_path / "graph.html"
    page.write_text(render(GRAPH_DOC, "html"), encoding="utf-8")
    shot = tmp_path / "graph.png"
    dom = load(page, tmp_path, screenshot=shot)

    # hostile strings stayed text: the browser built no element from them
    assert not dom.find_all("script") and not dom.find_all("img")
    assert HOSTILE in dom.one("section", "graph").text()
    assert dom.one("header", "verdict").attrs["data-verdict"] == "fail"

    nodes = {g.attrs["data-node"]: g for g in dom.find_all("g", "node")}
    assert set(nodes) == {n["id"] for n in GRAPH["nodes"]}
    assert {nid for nid, g in nodes.items() if "stale" in g.classes} == {"n3"}
    assert {nid for nid, g in nodes.items() if "root" in g.classes} == {"n1"}
    stale = nodes["n3"].one("text", "stale")
    assert stale.attrs["data-tensor"] == "t2" and "v0 -> v1" in stale.text()
    edges = {(p.attrs["data-from"], p.attrs["data-to"]) for p in dom.find_all("path", "edge")}
    assert edges == EDGES

    # every node with a forward line links to the timeline row of that line
    for n in GRAPH["nodes"]:
        links = nodes[n["id"]].find_all("a")
        if n["line"] is None:
            assert not links
            continue
        target = dom.by_id(links[0].attrs["href"].lstrip("#"))
        assert target is not None and target.attrs["data-line"] == str(n["line"])

    # the layout: boxes never overlap, and every edge goes down from a node to the next
    boxes = {nid: _box(g) for nid, g in nodes.items()}
    ids = sorted(boxes)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            (ax, ay, aw, ah), (bx, by, bw, bh) = boxes[a], boxes[b]
            assert ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay, (a, b)
    for a, b in EDGES:
        assert boxes[b][1] >= boxes[a][1] + boxes[a][3]

    # the storage map: y and its view v on one storage, both outlined as the stale tensor's aliases
    bars = {b.attrs["data-tensor"]: b for b in dom.find_all("rect", "bar")}
    assert {t for t, b in bars.items() if "stale-alias" in b.classes} == {"t2", "t3"}
    assert json.loads(bars["t3"].attrs["data-names"]) == ["v", HOSTILE]
    overlap = dom.one("svg", "storage", data_storage="s2").one("rect", "overlap")
    assert overlap.attrs["data-range"] == "0,8" and overlap.attrs["data-count"] == "2"

    rows = dom.find_all("tr", "event")
    assert len(rows) == len(GRAPH_DOC["events"])
    assert [r.attrs["data-line"] for r in rows if "culprit" in r.classes] == ["6"]
    assert [r.attrs["data-line"] for r in rows if "chain" in r.classes] == ["5"]

    width, height, colours = png_facts(shot)
    assert (width, height) == WINDOW and colours > 16


def _byte_range(t: torch.Tensor) -> str:
    start = t.storage_offset() * t.element_size()
    span = sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1 if t.numel() else 0
    return f"{start},{start + span * t.element_size()}"


def _shares_version_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    with torch.no_grad():
        before = b._version
        a.add_(0)
        return b._version != before


@pytest.fixture(scope="module")
def view_write_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    page = tmp / "report.html"
    rc, out, err, _ = run_cli("explain", "-o", str(page), VIEW_WRITE)
    return tmp, page, rc, out, err


def test_o_html_leaves_the_program_output_alone(view_write_page):
    _, page, _, out, _ = view_write_page
    rc, plain_out, _ = run_python(REPO / VIEW_WRITE, fresh=False)
    assert rc == 1 and out == plain_out
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@needs_browser
def test_real_failure_in_the_browser(view_write_page):
    tmp, page, _, _, _ = view_write_page
    dom = load(page, tmp, screenshot=tmp / "view_write.png")

    # the same tensors, rebuilt with torch
    x = torch.tensor([1.0, 1.0, 1.0], requires_grad=True)
    y = torch.tensor([2.0, 4.0, 6.0], requires_grad=True).view(-1, 1)
    z = torch.matmul(x, y)
    tmp_alias = y.detach()
    tmp_alias.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()

    header = dom.one("header", "verdict")
    assert header.attrs["data-verdict"] == "fail" and "inplace-modified-saved-tensor" in header.text()

    bars = {tuple(json.loads(b.attrs["data-names"])): b for b in dom.find_all("rect", "bar")}
    by, bt, bx = bars[("y",)], bars[("tmp",)], bars[("x",)]
    same = y.untyped_storage()._cdata == tmp_alias.untyped_storage()._cdata
    assert (by.attrs["data-storage"] == bt.attrs["data-storage"]) is same is True
    assert (bx.attrs["data-storage"] == by.attrs["data-storage"]) is (x.untyped_storage()._cdata == y.untyped_storage()._cdata)
    assert by.attrs["data-range"] == _byte_range(y) and bt.attrs["data-range"] == _byte_range(tmp_alias)
    assert (by.attrs["data-vc"] == bt.attrs["data-vc"]) is _shares_version_counter(tmp_alias, y) is True
    assert "stale-alias" in by.classes and "stale-alias" in bt.classes and "stale-alias" not in bx.classes

    rows = dom.find_all("tr", "event")
    assert rows and all(r.one("td", "loc").text().startswith(VIEW_WRITE + ":") for r in rows)
    marked = {cls: {r.attrs["data-line"] for r in rows if cls in r.classes}
              for cls in ("culprit", "saved-by", "backward-line")}
    assert marked == {"culprit": {str(line_of(REPO / VIEW_WRITE, "tmp.mul_(2)"))},
                      "saved-by": {str(line_of(REPO / VIEW_WRITE, "z = torch.matmul(x, y)"))},
                      "backward-line": {str(line_of(REPO / VIEW_WRITE, "z.backward()"))}}

    # once the report carries the graph of the failing backward, its stale node is the one that saved y
    nodes = dom.find_all("g", "node")
    if nodes:
        stale = [g for g in nodes if "stale" in g.classes]
        assert [g.attrs["data-line"] for g in stale] == [str(line_of(REPO / VIEW_WRITE, "z = torch.matmul(x, y)"))]


@needs_browser
def test_stride_zero_and_overlap_in_the_browser(tmp_path):
    page = tmp_path / "expand.HTM"
    rc, out, err, _ = run_cli("run", "-o", str(page), EXPAND)
    assert page.exists(), err
    dom = load(page, tmp_path)

    row = torch.tensor([[1.0, 2.0, 3.0]])
    big = row.expand(4, -1)
    bars = {tuple(json.loads(b.attrs["data-names"])): b for b in dom.find_all("rect", "bar")}
    brow, bbig = bars[("row",)], bars[("big",)]
    assert (bbig.attrs["data-stride0"] == "true") is (0 in big.stride()) is True
    assert brow.attrs["data-stride0"] == "false" and "stride0" in bbig.classes
    assert brow.attrs["data-range"] == _byte_range(row) and bbig.attrs["data-range"] == _byte_range(big)
    assert (brow.attrs["data-vc"] == bbig.attrs["data-vc"]) is _shares_version_counter(row, big) is True
    # both reach the same bytes: the storage shows them as reached twice
    svg = dom.one("svg", "storage", data_storage=brow.attrs["data-storage"])
    lo = max(int(brow.attrs["data-range"].split(",")[0]), int(bbig.attrs["data-range"].split(",")[0]))
    hi = min(int(brow.attrs["data-range"].split(",")[1]), int(bbig.attrs["data-range"].split(",")[1]))
    assert [o.attrs["data-range"] for o in svg.find_all("rect", "overlap")] == [f"{lo},{hi}"]
    assert "stride 0" in svg.text()


# -- a GPT-2-size failure: the path to the stale node first, the whole graph laid out in layers ----

GPT2 = "tests/programs/gpt2_head_mask.py"
CULPRIT = "attn_weights *= head_mask"


def _run_program(source: str):
    """Run the program's source in this process with torch; return its globals and the error
    backward() raised (None if it ran through)."""
    scope = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exec(compile(source, str(REPO / GPT2), "exec"), scope)
        except RuntimeError as e:
            return scope, e
    return scope, None


def _torch_graph():
    """The program's autograd graph, read with torch from its forward run here: {seq: (name, [next
    seqs])} (AccumulateGrad left out, as the report leaves it), the root's seq, and for the node whose
    saved tensor raises the version error: its seq, the saved name and (now, expected) versions.
    Ablation: the same program with the write made out of place runs backward through."""
    source = (REPO / GPT2).read_text()
    _, error = _run_program(source)
    assert error is not None and "modified by an inplace operation" in str(error)
    _, fixed_error = _run_program(source.replace(CULPRIT, "attn_weights = attn_weights * head_mask"))
    assert fixed_error is None
    scope, _ = _run_program(source.replace("loss.backward()", "pass"))
    root = scope["loss"].grad_fn
    graph, stale, queue = {}, [], [root]
    while queue:
        node = queue.pop()
        if node is None or hasattr(node, "variable") or node._sequence_nr() in graph:
            continue
        nxt = [n for n, _ in node.next_functions if n is not None and not hasattr(n, "variable")]
        graph[node._sequence_nr()] = (node.name(), [n._sequence_nr() for n in nxt])
        queue += nxt
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    getattr(node, attr)
                except RuntimeError as e:
                    found = re.search(r"is at version (\d+); expected version (\d+)", str(e))
                    stale.append((node._sequence_nr(), attr[len("_saved_"):], found.groups()))
    assert len(stale) == 1
    return graph, root._sequence_nr(), stale[0]


def _distance(graph: dict, a: int, b: int) -> int:
    seen, frontier, d = {a}, [a], 0
    while frontier:
        if b in frontier:
            return d
        frontier = [m for s in frontier for m in graph[s][1] if m not in seen and not seen.add(m)]
        d += 1
    return -1


@pytest.fixture(scope="module")
def gpt2_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpt2")
    page = tmp / "gpt2.html"
    rc, out, err, _ = run_cli("explain", "-o", str(page), GPT2)
    assert rc == 1 and page.exists(), err[-3000:]
    return tmp, page, _torch_graph()


def test_gpt2_graph_path_is_autograd_s(gpt2_page):
    """The report's nodes, edges and the path it shows first, checked against torch's own graph."""
    _, page, (graph, root, (stale_seq, saved_name, (now, expected))) = gpt2_page
    dom = parse(page.read_text(encoding="utf-8"))
    section = dom.one("section", "graph")
    svg_nodes = {g.attrs["data-node"]: g for g in section.find_all("g", "node")}
    seq_of = {nid: int(g.attrs["data-seq"]) for nid, g in svg_nodes.items()}
    stale_svg = [g for g in svg_nodes.values() if "stale" in g.classes]
    assert len(stale_svg) == 1
    # sequence numbers run on from another start in this process: shift them by the stale node's
    shift = int(stale_svg[0].attrs["data-seq"]) - stale_seq
    ours = {nid: s - shift for nid, s in seq_of.items()}
    assert all(graph[s][0] == svg_nodes[nid].attrs["data-name"] for nid, s in ours.items())
    kept = set(ours.values())
    edges = {(ours[p.attrs["data-from"]], ours[p.attrs["data-to"]]) for p in section.find_all("path", "edge")}
    assert edges == {(s, m) for s in kept for m in graph[s][1] if m in kept}
    assert len(kept) < len(graph)  # a model of this size: the report keeps the nodes nearest the stale one

    focus = section.one("div", "focus")
    path = [int(d.attrs["data-seq"]) - shift for d in focus.find_all("div", "node")
            if "flows-to" not in d.parent.classes]
    assert path[-1] == stale_seq
    assert all(b in graph[a][1] for a, b in zip(path, path[1:]))
    assert len(path) - 1 == _distance(graph, path[0], stale_seq)  # a shortest path
    if root in kept:
        assert path[0] == root
    else:  # cut above: it starts at a node whose parents were not kept
        assert not [s for s in kept if path[0] in graph[s][1]]
    runs = focus.find_all("details", "run")
    assert runs and sum(int(r.attrs["data-count"]) for r in runs) >= len(path) // 2
    for r in runs:
        names = collections.Counter(graph[int(d.attrs["data-seq"]) - shift][0] for d in r.find_all("div", "node"))
        summary = r.one("summary").text()
        assert summary.startswith(f"{sum(names.values())} nodes: ")
        for name, n in re.findall(r"(\w+) x(\d+)", summary):
            assert names[name] == int(n)
    below = [int(d.attrs["data-seq"]) - shift for d in focus.find_all("div", "node") if "flows-to" in d.parent.classes]
    assert below == [m for m in graph[stale_seq][1]]
    [stale_box] = [d for d in focus.find_all("div", "node") if "stale" in d.classes]
    assert stale_box.attrs["data-line"] == str(line_of(REPO / GPT2, "attn_weights.softmax(dim=-1)"))
    assert f"{saved_name} = attn_weights" in stale_box.text() and f"v{expected} -> v{now}" in stale_box.text()

    # every text of the whole graph whole: names, places, source lines and saved tensors
    lines = (REPO / GPT2).read_text().splitlines()
    for nid, g in svg_nodes.items():
        texts = {t.attrs["class"]: t.text() for t in g.find_all("text")}
        assert texts["title"] == f"{graph[ours[nid]][0]}  seq_nr {seq_of[nid]}"
        if g.attrs["data-line"]:
            line = int(g.attrs["data-line"])
            assert texts["link"] == f"{GPT2}:{line}"
            assert texts["muted source"] == lines[line - 1].split("  #")[0].strip()
    assert stale_svg[0].one("text", "stale").text().startswith(f"{saved_name} = attn_weights")


@needs_browser
def test_gpt2_graph_in_the_browser(gpt2_page):
    """In Chromium, 1280x1000: the stale node in the first screen, nothing cut, folds open on a
    click, no edge through a box that is not its end, zoom."""
    tmp, page, (_, _, (stale_seq, _, _)) = gpt2_page
    m = measure(page, tmp, (Path(__file__).parent / "graph_probe.js").read_text(), window=(1280, 1000))
    height = m["viewport"][1]
    assert 0 < m["stale"]["top"] < m["stale"]["bottom"] <= height
    assert m["stale"]["saved"] and m["stale"]["saved"][0].endswith("STALE")
    # the first view is bounded: the whole graph, ~9 screens tall, stays folded under the path
    assert m["fullBefore"] == {"open": False, "shown": False}
    assert m["fullAfter"]["open"] and m["fullAfter"]["shown"] and m["fullAfter"]["height"] > 5 * height
    assert m["sectionBottom"] < 2 * height
    assert m["runBefore"]["shown"] == 0 < m["runBefore"]["count"] == m["runAfter"]["shown"] and m["runAfter"]["open"]
    assert m["htmlClipped"] == [] and m["svgClipped"] == []
    assert m["overlaps"] == [] and m["through"] == [] and m["down"] == 0 and m["edges"]
    assert [n["seq"] for n in m["nodes"] if n["stale"]] == [m["stale"]["seq"]]
    assert m["zoom"]["before"] == m["zoom"]["attr"] and abs(m["zoom"]["quarter"] - m["zoom"]["attr"] / 4) < 1
