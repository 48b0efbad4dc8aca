"""The autograd graph of a failing backward, drawn as SVG for the HTML form.

Input: a finding's ``graph`` (plain data: nodes with ``next`` edges, what each node saved and
at which version). networkx lays the graph out in layers (its topological generations, placed
by ``multipartite_layout``); this module only orders each layer to keep edges from crossing,
scales the positions to boxes of text, and writes SVG. Each node links to its forward line in
the timeline; a node holding a stale saved tensor is drawn in red.
"""

from __future__ import annotations

from tensorscope.render.html_parts import clip, esc, place_link

_NODE_W = 290
_GAP_X = 30
_GAP_Y = 46
_LINE_H = 16
_MARGIN = 12


def layout(graph: dict) -> dict:
    """Node id -> (x, y) of its box's top-left corner, and the SVG's size under ``None``."""
    import networkx as nx  # heavy: imported when a graph is drawn

    nodes = graph["nodes"]
    ids = [n["id"] for n in nodes]
    g = nx.DiGraph()
    g.add_nodes_from(ids)
    g.add_edges_from((n["id"], m) for n in nodes for m in n.get("next") or [] if m in g and m != n["id"])
    try:
        layers = [list(gen) for gen in nx.topological_generations(g)]
    except nx.NetworkXUnfeasible:  # a cycle cannot come from autograd, but never crash on a document
        depth = nx.single_source_shortest_path_length(g, graph["root"]) if graph.get("root") in g else {}
        last = max(depth.values(), default=-1) + 1
        layers = [[] for _ in range(last + 1)]
        for nid in ids:
            layers[depth.get(nid, last)].append(nid)
        layers = [layer for layer in layers if layer]
    # Order each layer by where its parents stand (barycentre), so that edges cross less.
    first_seen = {nid: k for k, nid in enumerate(ids)}
    rank: dict = {}
    ordered = []
    for i, layer in enumerate(layers):
        if i:
            layer = sorted(layer, key=lambda nid: _mean([rank[p] for p in g.predecessors(nid) if p in rank],
                                                          first_seen[nid]))
        rank.update({nid: k for k, nid in enumerate(layer)})
        ordered.append(layer)
    # Layers given as a dict of lists keep their order (a node attribute would go through a set
    # and make the page depend on the hash seed).
    pos = nx.multipartite_layout(g, subset_key=dict(enumerate(ordered)), align="horizontal")
    # multipartite_layout spreads each layer evenly over [-1, 1]: scale so that boxes never overlap.
    xs = {nid: float(pos[nid][0]) for nid in ids}
    gaps = [xs[b] - xs[a] for layer in ordered for a, b in zip(layer, layer[1:])]
    factor = (_NODE_W + _GAP_X) / min(gaps) if gaps and min(gaps) > 0 else 1.0
    min_x = min(xs.values())
    heights = {n["id"]: box_height(n) for n in nodes}
    out: dict = {}
    y = _MARGIN
    for layer in ordered:
        for nid in layer:
            out[nid] = ((xs[nid] - min_x) * factor + _MARGIN, y)
        y += max(heights[nid] for nid in layer) + _GAP_Y
    width = max(x for x, _ in out.values()) + _NODE_W + _MARGIN
    out[None] = (width, y - _GAP_Y + _MARGIN)
    return out


def _mean(values, default) -> float:
    return sum(values) / len(values) if values else default


def box_height(node: dict) -> int:
    return 3 * _LINE_H + 10 + _LINE_H * len(node.get("saved") or [])


def _saved_label(s: dict, names: dict) -> str:
    tid = s.get("tensor")
    who = ", ".join(names.get(tid) or []) if tid else ""
    who = f"{who} ({tid})" if who else (tid or "?")
    at = "?" if s.get("version_at_save") is None else s["version_at_save"]
    text = f"{s.get('name')} = {who}  v{at} -> v{s.get('version_now')}"
    return text + ("  STALE" if s.get("stale") else "")


def graph_section(finding: dict, index: int, names: dict, anchors: dict, codes: dict, role: str) -> str:
    """The <section> with the graph of FINDING's backward (``finding["graph"]``)."""
    graph = finding["graph"]
    nodes = graph.get("nodes") or []
    title = ("Autograd graph of the failing backward" if role == "diagnosis"
             else "Autograd graph of the backward that used the changed tensor")
    head = f'<section class="graph" id="graph-{index}" data-role="{esc(role)}"><h2>{title}</h2>'
    if not nodes:
        return head + "<p>No nodes were recorded.</p></section>"
    pos = layout(graph)
    width, height = pos[None]
    arrow = f"arrow-{index}"
    els = [f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/>'
           f"</marker></defs>"]
    by_id = {n["id"]: n for n in nodes}
    for n in nodes:
        x, y = pos[n["id"]]
        for m in n.get("next") or []:
            if m not in by_id or m == n["id"]:
                continue
            mx, my = pos[m]
            x1, y1 = x + _NODE_W / 2, y + box_height(n)
            x2, y2 = mx + _NODE_W / 2, my
            mid = (y1 + y2) / 2
            els.append(f'<path class="edge" data-from="{esc(n["id"])}" data-to="{esc(m)}" '
                       f'd="M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}" '
                       f'marker-end="url(#{arrow})"/>')
    for n in nodes:
        els.append(_node_svg(n, pos[n["id"]], graph.get("root"), names, anchors, codes, index))
    parts = [head,
             "<p>Each box is a node of the graph that backward() went through, from the root at the top "
             "towards the leaves; it lists the tensors the node saved for backward with their version at "
             "save and now, and links to the forward line that created it.</p>",
             f'<div style="overflow-x:auto"><svg class="autograd-graph" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="autograd graph">'
             + "".join(els) + "</svg></div>"]
    if graph.get("truncated"):
        parts.append('<p class="note truncated">The graph is larger than shown: it was cut after '
                     f"{len(nodes)} nodes.</p>")
    stale = [(n, s) for n in nodes for s in n.get("saved") or [] if s.get("stale")]
    for n, s in stale:
        parts.append(f'<div class="stale-saved"><strong>stale:</strong> <code>{esc(_saved_label(s, names))}</code>'
                     f' saved by {esc(n.get("name"))} at {place_link(n.get("file"), n.get("line"), anchors)}</div>')
    if stale and finding.get("alias_chain"):
        parts.append('<div><strong>written through</strong><ol class="chain">' + "".join(
            f'<li>{place_link(c.get("file"), c.get("line"), anchors)} <code>{esc(c.get("code"))}</code> '
            f'<span class="what">{esc(c.get("what"))}</span></li>' for c in finding["alias_chain"]) + "</ol></div>")
    parts.append("</section>")
    return "\n".join(parts)


def _node_svg(n: dict, xy, root, names: dict, anchors: dict, codes: dict, index: int) -> str:
    x, y = xy
    h = box_height(n)
    saved = n.get("saved") or []
    stale = any(s.get("stale") for s in saved)
    cls = "node" + (" stale" if stale else "") + (" root" if n["id"] == root else "")
    seq = f"  seq_nr {n['seq_nr']}" if n.get("seq_nr") is not None else ""
    els = [f'<rect class="box" x="{x:.1f}" y="{y:.1f}" rx="6" width="{_NODE_W}" height="{h}"/>',
           f'<text class="title" x="{x + 8:.1f}" y="{y + 18:.1f}">{esc(n.get("name"))}'
           f'<tspan class="muted" font-weight="400">{esc(seq)}</tspan></text>']
    line = n.get("line")
    code = codes.get((n.get("file"), line), "")
    if line:
        loc = f"{n.get('file') or ''}:{line}"
        loc = esc(loc if len(loc) <= 38 else "…" + loc[-37:])  # keep the line number in sight
        target = anchors.get((n.get("file"), line))
        link = f'<text class="link" x="{x + 8:.1f}" y="{y + 18 + _LINE_H:.1f}">{loc}</text>'
        els.append(f'<a href="#{target}">{link}</a>' if target else link.replace('class="link"', 'class="muted"'))
        els.append(f'<text class="muted" x="{x + 8:.1f}" y="{y + 18 + 2 * _LINE_H:.1f}">'
                   f"<title>{esc(code)}</title>{esc(clip(code, 38))}</text>")
    else:
        els.append(f'<text class="muted" x="{x + 8:.1f}" y="{y + 18 + _LINE_H:.1f}">forward line not known</text>')
    for i, s in enumerate(saved):
        label = _saved_label(s, names)
        els.append(f'<text class="saved{" stale" if s.get("stale") else ""}" data-tensor="{esc(s.get("tensor"))}" '
                   f'x="{x + 8:.1f}" y="{y + 18 + (3 + i) * _LINE_H:.1f}"><title>{esc(label)}</title>'
                   f"{esc(clip(label, 38))}</text>")
    return (f'<g class="{cls}" id="node-{index}-{esc(n["id"])}" data-node="{esc(n["id"])}" '
            f'data-name="{esc(n.get("name"))}" data-file="{esc(n.get("file"))}" data-line="{esc(line)}">'
            f"<title>{esc(n.get('name'))}</title>" + "".join(els) + "</g>")
