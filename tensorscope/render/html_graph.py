"""The autograd graph of a failing backward, for the HTML form: the path to the stale node first,
then the whole graph, folded when large and zoomable.

Input: a finding's ``graph`` (plain data: nodes with ``next`` edges, what each node saved and at
which version). graph_focus.py picks the path shown first (NOTE [The stale node first]),
graph_layout.py places the boxes of the whole graph (NOTE [Layered layout of the autograd graph]);
this module writes them as HTML and SVG. Each node links to its forward line in the timeline; a
node holding a stale saved tensor is drawn in red. No script: folding is ``<details>``, zooming is
radio buttons and CSS, so the page stays one file that runs nothing.
"""

from __future__ import annotations

import unicodedata
import zlib

from tensorscope.render.graph_focus import SMALL, focus, run_summary
from tensorscope.render.graph_layout import layered
from tensorscope.render.html_parts import esc, place_link

# Text in the SVG is 12px monospace (13px bold for a node's name): ui-monospace, SF Mono, Menlo,
# Consolas, DejaVu Sans Mono and Liberation Mono advance at most 0.61em a character, so a box sized
# at these widths per column holds its longest line whole. Lines wrap at _MAX_COLS columns.
_CW = 7.6
_CW_TITLE = 8.3
_MAX_COLS = 52
_MIN_W = 150
_LINE_H = 16
_PAD = 8
_ZOOMS = (("1", "100%"), ("fit", "fit to width"), ("half", "50%"), ("quarter", "25%"))

CSS = """
section.graph .focus{margin:8px 0 12px}
ol.path{list-style:none;margin:0;padding:0}
ol.path>li{margin:0}
ol.path>li+li::before{content:"\\2193";display:block;color:#57606a;padding-left:18px;line-height:13px}
ol.path ol.path{margin:6px 0 4px 18px;padding-left:10px;border-left:2px dotted #8c959f}
div.node{display:inline-block;max-width:100%;box-sizing:border-box;border:1.2px solid #57606a;border-radius:6px;padding:3px 10px;background:#fff;overflow-wrap:anywhere}
div.node.stale{background:#ffebe9;border:3px solid #cf222e}
div.node.root{border-width:2.2px}
div.node .title{font-weight:700}
div.node .where,div.node .saved{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap}
div.node .saved{display:block}
div.node .saved.stale{color:#cf222e;font-weight:700}
details.run>summary::before{content:"\\25B8  "}
details.run[open]>summary::before{content:"\\25BE  "}
details.run>summary{cursor:pointer;display:inline-block;border:1.2px dashed #8c959f;border-radius:6px;padding:3px 10px;color:#57606a;background:#f6f8fa}
.flows-to{margin:4px 0 0 18px;color:#57606a}
.flows-to div.node{margin:2px 6px 2px 0;vertical-align:top}
.stale-panel{border-left:4px solid #cf222e;padding:4px 10px;margin:8px 0;background:#fff}
details.full-graph>summary{cursor:pointer;font-weight:600;margin:8px 0}
.zoom{margin:4px 0;color:#57606a}
.graph-scroll{overflow:auto;max-height:85vh;border:1px solid #eaeef2}
input.zoom-fit:checked~.graph-scroll svg.autograd-graph{width:100%;height:auto}
input.zoom-half:checked~.graph-scroll svg.autograd-graph{width:calc(var(--w) * .5);height:auto}
input.zoom-quarter:checked~.graph-scroll svg.autograd-graph{width:calc(var(--w) * .25);height:auto}
svg.autograd-graph text{white-space:pre}
svg .node rect.box{fill:#fff;stroke:#57606a;stroke-width:1.2}
svg .node.stale rect.box{fill:#ffebe9;stroke:#cf222e;stroke-width:3}
svg .node.root rect.box{stroke-width:2.2}
svg .node .title{font-weight:700;font-size:13px}
svg .saved.stale{fill:#cf222e;font-weight:700}
svg a text.link{fill:#0969da;text-decoration:underline}
svg path.edge{fill:none;stroke:#57606a;stroke-width:1.3}
"""


# -- text: every line whole ------------------------------------------------------------------------

def cols(text: str) -> int:
    """Columns TEXT takes in a monospace font (East Asian wide characters take two)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def wrap(text: str, width: int = _MAX_COLS) -> list[str]:
    """TEXT cut into lines of at most WIDTH columns, preferably after a space or punctuation; the
    lines joined give TEXT back."""
    text = text.expandtabs(4)
    out = []
    while cols(text) > width:
        cut, used = 0, 0
        for i, c in enumerate(text):
            used += cols(c)
            if used > width:
                break
            cut = i + 1
        breaks = [i + 1 for i in range(cut) if text[i] in " ,([/.=+*-:" and i + 1 >= cut // 2]
        cut = max(breaks) if breaks else max(cut, 1)
        out.append(text[:cut])
        text = text[cut:]
    return out + [text]


def saved_label(s: dict, names: dict) -> str:
    tid = s.get("tensor")
    who = ", ".join(names.get(tid) or []) if tid else ""
    who = f"{who} ({tid})" if who else (tid or "?")
    at = "?" if s.get("version_at_save") is None else s["version_at_save"]
    text = f"{s.get('name')} = {who}  v{at} -> v{s.get('version_now')}"
    return text + ("  STALE" if s.get("stale") else "")


def _title(n: dict) -> str:
    seq = f"  seq_nr {n['seq_nr']}" if n.get("seq_nr") is not None else ""
    return f"{n.get('name')}{seq}"


# -- the section -----------------------------------------------------------------------------------

def graph_section(finding: dict, index: int, names: dict, anchors: dict, codes: dict, role: str) -> str:
    """The <section> with the graph of FINDING's backward (``finding["graph"]``)."""
    graph = finding["graph"]
    nodes = graph.get("nodes") or []
    title = ("Autograd graph of the failing backward" if role == "diagnosis"
             else "Autograd graph of the backward that used the changed tensor")
    head = f'<section class="graph" id="graph-{index}" data-role="{esc(role)}"><h2>{title}</h2>'
    if not nodes:
        return head + "<p>No nodes were recorded.</p></section>"
    by_id = {n["id"]: n for n in nodes}
    tensor = (finding.get("tensor") or {}).get("id")
    lines = {(p.get("file"), p.get("line")) for p in (finding.get(k) for k in ("culprit", "saved_by", "backward"))
             if p and p.get("line")}
    ctx = (names, anchors, codes, graph.get("root"))
    parts = [head]
    saving = finding.get("saved_by") or {}
    f = focus(graph, tensor, lines, (saving.get("file"), saving.get("line")))
    if f is not None:
        parts.append(_focus_html(f, by_id, finding, ctx, len(nodes), bool(graph.get("truncated"))))
    else:
        parts.append(_stale_panel(nodes, finding, names, anchors))
    parts.append(_full_graph(graph, index, ctx, open_=len(nodes) <= SMALL))
    if graph.get("truncated"):
        parts.append('<p class="note truncated">The graph is larger than shown: it was cut after '
                     f"{len(nodes)} nodes.</p>")
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


def _stale_panel(nodes: list, finding: dict, names: dict, anchors: dict) -> str:
    """The stale saved tensor(s), who saved them, and the alias chain that wrote them."""
    stale = [(n, s) for n in nodes for s in n.get("saved") or [] if s.get("stale")]
    parts = []
    for n, s in stale:
        parts.append(f'<div class="stale-saved"><strong>stale:</strong> <code>{esc(saved_label(s, names))}</code>'
                     f' saved by {esc(n.get("name"))}'
                     + (f' at {place_link(n.get("file"), n.get("line"), anchors)}' if n.get("line") else "") + "</div>")
    if stale and finding.get("alias_chain"):
        parts.append('<div><strong>written through</strong><ol class="chain">' + "".join(
            f'<li>{place_link(c.get("file"), c.get("line"), anchors)} <code>{esc(c.get("code"))}</code> '
            f'<span class="what">{esc(c.get("what"))}</span></li>' for c in finding["alias_chain"]) + "</ol></div>")
    elif stale and (finding.get("culprit") or {}).get("line"):
        c = finding["culprit"]
        via = f" through <code>{esc(c['alias'])}</code>" if c.get("alias") else ""
        parts.append(f'<div><strong>written at</strong> {place_link(c.get("file"), c["line"], anchors)} '
                     f'<code>{esc(c.get("code"))}</code>{via}</div>')
    return '<div class="stale-panel">' + "\n".join(parts) + "</div>" if parts else ""


def _focus_html(f, by_id: dict, finding: dict, ctx, total: int, truncated: bool) -> str:
    target = by_id[f.target]
    start = ("the root" if f.from_root else
             "the highest node kept (the report's graph was cut above it)" if truncated else "the top of the graph")
    shown = sum(1 for kind, _ in f.steps if kind == "node")
    folded = sum(len(ids) for kind, ids in f.steps if kind == "run")
    lead = (f'<p class="lead">Above: the path backward() took from {start} down to the node whose saved tensor '
            f"was changed, {shown + folded} of the {total} nodes"
            + (f", {folded} folded (click to open)" if folded else "")
            + ". The whole graph is below.</p>")
    items = []
    for kind, what in f.steps:
        if kind == "node":
            items.append(f"<li>{_node_html(by_id[what], ctx)}</li>")
        else:
            inner = "".join(f"<li>{_node_html(by_id[nid], ctx)}</li>" for nid in what)
            items.append(f'<li><details class="run" data-count="{len(what)}"><summary>'
                         f'{esc(run_summary([by_id[nid].get("name") or "?" for nid in what]))}</summary>'
                         f'<ol class="path">{inner}</ol></details></li>')
    below = ""
    if f.below:
        below = ('<div class="flows-to">its gradient flows on to: '
                 + "".join(_node_html(by_id[nid], ctx) for nid in f.below) + "</div>")
    others = ""
    if f.other_stale:
        others = ("<p>Other nodes holding a stale saved tensor (red in the whole graph): "
                  + ", ".join(f'{esc(by_id[nid].get("name"))} ({esc(nid)})' for nid in f.other_stale) + ".</p>")
    panel = _stale_panel([target], finding, ctx[0], ctx[1])
    return (f'<div class="focus" data-target="{esc(f.target)}" data-start="{esc(f.start)}">'
            + '<ol class="path">' + "".join(items) + "</ol>" + below + panel + lead + others + "</div>")


def _node_html(n: dict, ctx) -> str:
    names, anchors, codes, root = ctx
    saved = n.get("saved") or []
    cls = "node" + (" stale" if any(s.get("stale") for s in saved) else "") + (" root" if n["id"] == root else "")
    line = n.get("line")
    if line:
        code = codes.get((n.get("file"), line), "")
        where = place_link(n.get("file"), line, anchors) + (f"  {esc(code)}" if code else "")
    else:
        where = '<span class="muted">forward line not known</span>'
    # name and place on one line (wrapping when long): a path of boxes stays short
    rows = [f'<div><span class="title">{esc(n.get("name"))}</span>'
            + (f' <span class="muted">seq_nr {esc(n["seq_nr"])}</span>' if n.get("seq_nr") is not None else "")
            + f'  <span class="where">{where}</span></div>']
    for s in saved:
        rows.append(f'<div class="saved{" stale" if s.get("stale") else ""}" data-tensor="{esc(s.get("tensor"))}">'
                    f"{esc(saved_label(s, names))}</div>")
    return (f'<div class="{cls}" data-node="{esc(n["id"])}" data-name="{esc(n.get("name"))}" '
            f'data-seq="{esc(n.get("seq_nr"))}" data-line="{esc(line)}">' + "".join(rows) + "</div>")


# -- the whole graph as SVG ------------------------------------------------------------------------

def _box_lines(n: dict, names: dict, codes: dict) -> list:
    """The text of a node's box: [(class, lines, tensor or None)], each field wrapped whole."""
    out = [("title", wrap(_title(n)), None)]
    line = n.get("line")
    if line:
        out.append(("link", wrap(f"{n.get('file') or ''}:{line}"), None))
        code = codes.get((n.get("file"), line), "")
        if code:
            out.append(("muted source", wrap(code), None))
    else:
        out.append(("muted", ["forward line not known"], None))
    for s in n.get("saved") or []:
        out.append(("saved stale" if s.get("stale") else "saved", wrap(saved_label(s, names)), s.get("tensor")))
    return out


def _box_size(fields: list) -> tuple[float, float]:
    w = max(max(cols(t) for t in lines) * (_CW_TITLE if cls == "title" else _CW) for cls, lines, _ in fields)
    n_lines = sum(len(lines) for _, lines, _ in fields)
    return max(_MIN_W, w + 2 * _PAD), n_lines * _LINE_H + 12


def _full_graph(graph: dict, index: int, ctx, open_: bool) -> str:
    names, anchors, codes, root = ctx
    nodes = graph["nodes"]
    fields = {n["id"]: _box_lines(n, names, codes) for n in nodes}
    sizes = {nid: _box_size(f) for nid, f in fields.items()}
    edges = [(n["id"], m) for n in nodes for m in n.get("next") or []]
    lay = layered([(n["id"], *sizes[n["id"]]) for n in nodes], edges)
    width, height = lay.width, lay.height
    arrow = f"arrow-{index}"
    els = [f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/>'
           f"</marker></defs>"]
    for a, b, pts in lay.edges:
        els.append(f'<path class="edge" data-from="{esc(a)}" data-to="{esc(b)}" d="{_edge_d(pts)}" '
                   f'marker-end="url(#{arrow})"/>')
    for n in nodes:
        els.append(_node_svg(n, lay.boxes[n["id"]], fields[n["id"]], root, anchors, index))
    count = f"{len(nodes)} nodes, {len(lay.edges)} edges, {len(lay.layers)} layers"
    # radio groups and ids unique to this graph, so two reports embedded in one notebook page each
    # keep their own zoom
    group = f"zoom-{index}-{zlib.crc32(repr([(n['id'], n.get('seq_nr')) for n in nodes]).encode()):08x}"
    zoom = "".join(
        f'<input type="radio" class="zoom-{key}" name="{group}" id="{group}-{key}"'
        + (" checked" if key == "1" else "") + f'><label for="{group}-{key}">{label}</label> '
        for key, label in _ZOOMS)
    return (f'<details class="full-graph"{" open" if open_ else ""}><summary>The whole graph: {count}</summary>'
            "<p>Each box is a node of the graph that backward() went through, from the root at the top towards "
            "the leaves; it lists the tensors the node saved for backward with their version at save and now, "
            "and links to the forward line that created it.</p>"
            f'<span class="zoom">zoom: </span>{zoom}<div class="graph-scroll">'
            f'<svg class="autograd-graph" width="{width:.0f}" height="{height:.0f}" style="--w:{width:.0f}px" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="autograd graph">'
            + "".join(els) + "</svg></div></details>")


def _edge_d(pts: list) -> str:
    """Straight down inside a layer's band, a curve with vertical ends across a gap."""
    d = [f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"]
    for i in range(1, len(pts)):
        (x1, y1), (x2, y2) = pts[i - 1], pts[i]
        if i % 2:  # from a box (or a dummy slot) to the bottom of its band
            d.append(f"L{x2:.1f},{y2:.1f}")
        else:
            mid = (y1 + y2) / 2
            d.append(f"C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}")
    return " ".join(d)


def _node_svg(n: dict, box, fields: list, root, anchors: dict, index: int) -> str:
    x, y, w, h = box
    saved = n.get("saved") or []
    cls = "node" + (" stale" if any(s.get("stale") for s in saved) else "") + (" root" if n["id"] == root else "")
    els = [f'<rect class="box" x="{x:.1f}" y="{y:.1f}" rx="6" width="{w:.1f}" height="{h:.1f}"/>']
    line_y = y + 6 + 12
    line = n.get("line")
    for field, lines, tensor in fields:
        spans = "".join(f'<tspan x="{x + _PAD:.1f}" y="{line_y + k * _LINE_H:.1f}">{esc(t)}</tspan>'
                        for k, t in enumerate(lines))
        attrs = f' data-tensor="{esc(tensor)}"' if field.startswith("saved") else ""
        text = f'<text class="{field}"{attrs}>{spans}</text>'
        if field == "link":
            target = anchors.get((n.get("file"), line))
            text = f'<a href="#{target}">{text}</a>' if target else text.replace('class="link"', 'class="muted"')
        els.append(text)
        line_y += len(lines) * _LINE_H
    return (f'<g class="{cls}" id="node-{index}-{esc(n["id"])}" data-node="{esc(n["id"])}" '
            f'data-name="{esc(n.get("name"))}" data-seq="{esc(n.get("seq_nr"))}" data-file="{esc(n.get("file"))}" '
            f'data-line="{esc(line)}">'
            f"<title>{esc(n.get('name'))}</title>" + "".join(els) + "</g>")
