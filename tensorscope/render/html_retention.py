"""The "Memory held" section of the HTML form: the holder paths drawn as SVG (docs/retention.md).

Input: the report's retention hazards (each with its ``retention`` object: holder, path of labels,
bytes per step, the allocating line) and its ``memory`` object (the top holders by bytes, each with
the path to its largest tensor, and the views that pin a larger storage). Each path is drawn as a
chain of boxes, from the name that holds it to the tensor it keeps: the name's box carries the
retaining line (the culprit), the tensor's box its bytes, its storage's bytes and the line that
allocated it, and every place links to its timeline row. Steps through the autograd graph, through
hooks or closures, and through a view's base are drawn in their own colours.
"""

from __future__ import annotations

from tensorscope import holder_path
from tensorscope.render.html_parts import clip, esc, place_link
from tensorscope.units import human_bytes as human

_BOX_W = 168
_BOX_H = 44
_GAP_X = 26
_GAP_Y = 26
_PER_ROW = 6
_MARGIN = 8
_CHARS = 24
_HOLDER_BAR = 360

CSS = """
section.memory-held .retention-path{margin:10px 0 16px}
section.memory-held .retention-path h3{font-size:14px;margin:0 0 4px}
svg.holder-path{max-width:100%;height:auto}
svg.holder-path rect.box{fill:#fff;stroke:#57606a;stroke-width:1.2}
svg.holder-path g.holder rect.box{fill:#fff8c5;stroke:#bf8700;stroke-width:2}
svg.holder-path g.target rect.box{fill:#ddf4ff;stroke:#0969da;stroke-width:2}
svg.holder-path g.step.graph rect.box{fill:#fbefff;stroke:#8250df}
svg.holder-path g.step.hook rect.box{fill:#fff1e5;stroke:#bc4c00}
svg.holder-path g.step.base rect.box{fill:#f6f8fa;stroke:#57606a;stroke-dasharray:4 2}
svg.holder-path path.edge{fill:none;stroke:#57606a;stroke-width:1.3}
svg.holder-path polygon.head{fill:#57606a}
svg.holder-path text.sub{fill:#57606a;font-size:11px}
section.memory-held .kind{font-family:ui-monospace,monospace;color:#9a6700}
section.memory-held span.muted{color:#57606a}
table.holders td.bytes{text-align:right;white-space:nowrap;font-family:ui-monospace,monospace}
table.holders rect.fill{fill:#4e79a7}
table.holders rect.track{fill:#f6f8fa}
"""

_RETENTION_KINDS = ("graph-kept-alive", "view-pins-storage", "hook-holds-tensors", "container-grows")


_label = holder_path.label
# How a step is drawn, by what it goes through (its `via`, NOTE [Holder path steps]).
_DRAWN_AS = {"grad_fn": "graph", "next": "graph", "saved": "graph", "ctx": "graph", "variable": "graph",
             "closure": "hook", "hook": "hook", "base": "base", "item": "item"}


def step_kind(step) -> str:
    """The box style of a path step: from its ``via`` (a report of schema_version 2 has labels only:
    such a step is drawn as a plain attribute)."""
    return _DRAWN_AS.get(step.get("via") if isinstance(step, dict) else None, "attr")


def memory_section(doc: dict, anchors: dict) -> str:
    """The section, or '' when the report holds no memory facts."""
    mem = doc.get("memory") or {}
    hazards = [h for h in (doc.get("hazards") or []) if h.get("kind") in _RETENTION_KINDS and h.get("retention")]
    d = doc.get("diagnosis")
    if d and (d.get("retention") or {}).get("path"):
        hazards.insert(0, d)
    holders = mem.get("holders") or []
    pinned = mem.get("pinned_views") or []
    if not (hazards or holders or pinned):
        return ""
    out = ['<section class="memory-held" id="memory-held"><h2>Memory held</h2>']
    if mem:
        out.append(f'<p>{esc(human(mem.get("total_bytes")))} in {esc(mem.get("storages"))} storages reached from the '
                   "program's names" + (" (the walk stopped early)" if mem.get("truncated") else "") + ".</p>")
    for i, h in enumerate(hazards):
        out.append(_hazard_path(h, i, anchors))
    for i, v in enumerate(pinned):
        out.append(_pinned_path(v, i, anchors))
    if holders:
        out.append(_holders_table(holders))
    out.append("</section>")
    return "\n".join(out)


def _hazard_path(h: dict, index: int, anchors: dict) -> str:
    r = h.get("retention") or {}
    culprit = h.get("culprit") or {}
    alloc = r.get("allocation") or {}
    growth = []
    if r.get("bytes_per_step"):
        growth.append(f"+{human(r['bytes_per_step'])}")
    if r.get("nodes_per_step"):
        growth.append(f"+{r['nodes_per_step']} graph nodes")
    title = (f'<span class="kind">{esc(h.get("kind"))}</span>: <code>{esc(r.get("holder") or "")}</code>'
             + (f" grows {esc(' and '.join(growth))} per step" if growth else ""))
    holder_sub = f"stored by line {culprit['line']}" if culprit.get("line") else (r.get("where") or "")
    target = {"bytes": r.get("nbytes"), "storage_bytes": r.get("storage_nbytes"),
              "file": alloc.get("file"), "line": alloc.get("line")}
    if r.get("nbytes") is None and r.get("nodes_per_step"):  # the path ends in the graph it keeps
        target["title"] = f"graph +{r['nodes_per_step']} nodes/step"
    svg = path_svg(r.get("path") or [r.get("holder") or "?"], holder_sub, target,
                   attrs={"data-kind": h.get("kind"), "data-holder": r.get("holder"),
                          "data-culprit-line": culprit.get("line"), "data-bytes-per-step": r.get("bytes_per_step"),
                          "data-nodes-per-step": r.get("nodes_per_step")})
    places = []
    if culprit.get("line"):
        places.append(f'stored by {place_link(culprit.get("file"), culprit["line"], anchors)} '
                      f'<code>{esc(culprit.get("code"))}</code>')
    if alloc.get("line"):
        places.append(f'allocated at {place_link(alloc.get("file"), alloc["line"], anchors)}'
                      + (f' ({esc(alloc.get("how"))})' if alloc.get("how") else ""))
    return (f'<div class="retention-path" id="holder-path-{index}"><h3>{title}</h3>{svg}'
            + (f'<div class="places">{" · ".join(places)}</div>' if places else "") + "</div>")


def _pinned_path(v: dict, index: int, anchors: dict) -> str:
    steps = v.get("path") or [v.get("tensor") or "?"]
    alloc = v.get("alloc") or {"file": v.get("file"), "line": v.get("line")}  # where the pinned storage was made
    target = {"bytes": v.get("nbytes"), "storage_bytes": v.get("storage_nbytes"), "file": alloc.get("file"),
              "line": alloc.get("line")}
    svg = path_svg(steps, "holds a view", target,
                   attrs={"data-kind": "view-pins-storage", "data-holder": _label(steps[0]), "data-pinned": "true"})
    where = (f' · sliced at {place_link(v.get("file"), v["line"], anchors)}' if v.get("line") else "")
    return (f'<div class="retention-path pinned" id="pinned-view-{index}"><h3>a view of {esc(human(v.get("nbytes")))} '
            f'keeps its whole storage of {esc(human(v.get("storage_nbytes")))} alive</h3>{svg}'
            f'<div class="places">fix: <code>.clone()</code> the view{where}</div></div>')


def _holders_table(holders: list) -> str:
    top = max((h.get("bytes") or 0 for h in holders), default=0) or 1
    rows = []
    for h in holders:
        nbytes = h.get("bytes") or 0
        w = max(1, round(_HOLDER_BAR * nbytes / top)) if nbytes else 0
        path = " → ".join(_label(s) for s in h.get("path") or [])
        extra = f', {h["graph_nodes"]} graph nodes' if h.get("graph_nodes") else ""
        rows.append(
            f'<tr class="holder" data-name="{esc(h.get("name"))}" data-bytes="{esc(nbytes)}">'
            f'<td><code>{esc(h.get("name"))}</code> <span class="muted">({esc(h.get("type"))}, {esc(h.get("where"))}; '
            f'{esc(h.get("tensors"))} tensors{esc(extra)})</span></td>'
            f'<td class="bytes">{esc(human(nbytes))}</td>'
            f'<td><svg class="holder-bar" width="{_HOLDER_BAR}" height="12"><rect class="track" width="{_HOLDER_BAR}" '
            f'height="12"/><rect class="fill" width="{w}" height="12" data-width="{w}"/></svg></td>'
            f'<td><code>{esc(clip(path, 90))}</code></td></tr>')
    return ('<table class="grid holders"><thead><tr><th>holder</th><th>bytes</th><th></th><th>largest tensor</th>'
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def path_svg(steps, holder_sub: str, target: dict, attrs: dict) -> str:
    """The chain of boxes: the holder, each step of the path, then the tensor kept (bytes, lines)."""
    steps = list(steps) or ["?"]
    labels = [_label(s) for s in steps]
    boxes = []  # (class, title, sub, data attrs)
    boxes.append(("holder", labels[0], holder_sub, {"data-label": labels[0]}))
    for step, lab in zip(steps[1:], labels[1:]):
        via = step.get("via") if isinstance(step, dict) else None
        boxes.append((f"step {step_kind(step)}", lab, "", {"data-label": lab, "data-via": via}))
    tsub = f"storage {human(target.get('storage_bytes'))}" if target.get("storage_bytes") else ""
    if target.get("line"):
        tsub = (tsub + " · " if tsub else "") + f"line {target['line']}"
    title = target.get("title") or (f"tensor {human(target.get('bytes'))}" if target.get("bytes") is not None else "tensor")
    boxes.append(("target", title,
                  tsub, {"data-bytes": target.get("bytes"), "data-storage-bytes": target.get("storage_bytes"),
                         "data-alloc-line": target.get("line")}))
    cols = min(_PER_ROW, len(boxes))
    rows = (len(boxes) + _PER_ROW - 1) // _PER_ROW
    width = 2 * _MARGIN + cols * _BOX_W + (cols - 1) * _GAP_X
    height = 2 * _MARGIN + rows * _BOX_H + (rows - 1) * _GAP_Y
    pos = []
    for k in range(len(boxes)):
        row, col = divmod(k, _PER_ROW)
        pos.append((_MARGIN + col * (_BOX_W + _GAP_X), _MARGIN + row * (_BOX_H + _GAP_Y)))
    head = " ".join(f'{k}="{esc(v)}"' for k, v in attrs.items() if v is not None)
    out = [f'<svg class="holder-path" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" {head}>']
    for k in range(1, len(boxes)):
        (x0, y0), (x1, y1) = pos[k - 1], pos[k]
        if y0 == y1:
            ex, ey = x1, y1 + _BOX_H / 2
            d = f"M{x0 + _BOX_W},{ey} L{ex},{ey}"
            head = f"{ex},{ey} {ex - 7},{ey - 4} {ex - 7},{ey + 4}"
        else:  # next row: down from the last box, back to the left, down into the first box of the row
            mid = y0 + _BOX_H + _GAP_Y / 2
            ex, ey = x1 + _BOX_W / 2, y1
            d = f"M{x0 + _BOX_W / 2},{y0 + _BOX_H} L{x0 + _BOX_W / 2},{mid} L{ex},{mid} L{ex},{ey}"
            head = f"{ex},{ey} {ex - 4},{ey - 7} {ex + 4},{ey - 7}"
        out.append(f'<path class="edge" d="{d}"/><polygon class="head" points="{head}"/>')
    for k, (cls, title, sub, data) in enumerate(boxes):
        x, y = pos[k]
        data_attrs = " ".join(f'{n}="{esc(v)}"' for n, v in data.items() if v is not None)
        out.append(f'<g class="{cls}" {data_attrs} transform="translate({x},{y})"><title>{esc(title)}</title>'
                   f'<rect class="box" width="{_BOX_W}" height="{_BOX_H}" rx="5"/>'
                   f'<text x="8" y="{18 if sub else 27}">{esc(clip(title, _CHARS))}</text>'
                   + (f'<text class="sub" x="8" y="35">{esc(clip(sub, _CHARS + 4))}</text>' if sub else "") + "</g>")
    out.append("</svg>")
    return "".join(out)
