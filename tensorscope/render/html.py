"""The HTML form: one self-contained page (no network: CSS and SVG inline, no script).

Sections: a verdict header, the diagnosis and hazards, the autograd graph of the failing
backward (when the document carries one, see :mod:`tensorscope.render.html_graph`), the memory
held with its holder paths (:mod:`tensorscope.render.html_retention`), the storage map drawn as SVG, the tensors, and the timeline with file:line.

Every string that comes from the user's program (source lines, names, messages) goes through
:func:`esc`. Elements carry ``data-*`` attributes (``data-tensor``, ``data-storage``, ...) so
the page can be checked in a browser's DOM and scripted against.

Example::

    >>> from tensorscope.render.html import render_html
    >>> page = render_html(doc)          # doc: the JSON document of a run
    >>> page.startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

import json

from tensorscope.render.fold import fold, repeats
from tensorscope.render.html_graph import CSS as GRAPH_CSS, graph_section
from tensorscope.render.html_parts import clip, esc, place_link
from tensorscope.render.html_retention import CSS as MEMORY_CSS
from tensorscope.render.html_retention import memory_section
from tensorscope.render.summary import failed_children
from tensorscope.render.text import _describe_event

# Bars of the storage map: the byte axis is this many pixels wide whatever the storage's size.
_BAR_W = 560
_LABEL_W = 200
_ROW_H = 22
# Version-counter groups get these colours in first-seen order (then cycle).
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7")

_CSS = """
.tensorscope{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;background:#fff}
main{max-width:1100px;margin:0 auto;padding:0 24px 48px}
header.verdict{padding:14px 24px;border-bottom:1px solid #d0d7de}
header.verdict.fail{background:#ffebe9;border-left:6px solid #cf222e}
header.verdict.hazard{background:#fff8c5;border-left:6px solid #bf8700}
header.verdict.ok{background:#dafbe1;border-left:6px solid #1a7f37}
header h1{font-size:20px;margin:0 0 4px}
header .meta{color:#57606a}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
code,.code,td.loc,.place{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.diagnosis{border:1px solid #d0d7de;border-left:6px solid #cf222e;border-radius:6px;padding:10px 14px;margin:12px 0}
.diagnosis.hazard{border-left-color:#bf8700}
.diagnosis h3{margin:0 0 6px;font-size:15px}
.diagnosis .kind{font-family:ui-monospace,monospace;color:#cf222e}
.places{border-collapse:collapse;margin:8px 0}
.places th{text-align:right;padding:2px 10px 2px 0;color:#57606a;font-weight:600;white-space:nowrap;vertical-align:top}
.places td{padding:2px 8px 2px 0;vertical-align:top}
.chain li{font-family:ui-monospace,monospace;font-size:13px}
.chain .what{font-family:system-ui,sans-serif;color:#57606a}
.fix{background:#dafbe1;border-radius:4px;padding:6px 10px;margin-top:8px}
.note{color:#9a6700}
table.grid{border-collapse:collapse;width:100%}
table.grid th,table.grid td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:left;vertical-align:top}
table.grid th{background:#f6f8fa;position:sticky;top:0}
tr.event.culprit{background:#ffebe9}
tr.event.chain{background:#fff8c5}
tr.event.saved-by{background:#ddf4ff}
tr.event.backward-line{background:#f6f8fa;font-weight:600}
tr:target{outline:2px solid #0969da}
.dead{color:#8c959f}
svg.storage{max-width:100%;height:auto}
svg text{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;fill:#1f2328}
svg .muted{fill:#57606a}
svg .axis{stroke:#d0d7de}
svg rect.track{fill:#f6f8fa}
svg rect.bar{stroke:#1f2328;stroke-width:.5}
svg rect.bar.stale-alias{stroke:#cf222e;stroke-width:2.5}
svg rect.overlap{fill:#cf222e;fill-opacity:.35}
svg text.stride0-note{fill:#0550ae}
.legend span{display:inline-block;margin-right:14px}
.swatch{display:inline-block;width:12px;height:12px;vertical-align:-1px;margin-right:4px;border:1px solid #1f2328}
"""


def render_html(doc: dict, *, fragment: bool = False) -> str:
    """Render a report document as one self-contained HTML page.

    With ``fragment=True``, the same content as one ``<div class="tensorscope">`` with its own
    ``<style>`` (every rule scoped to that class), to embed in another page such as a notebook.
    """
    names = {t["id"]: t["names"] for t in doc["tensors"]}
    anchors = _line_anchors(doc)
    parts = [_verdict(doc)]
    body = []
    for note in doc.get("notes") or []:
        body.append(f'<p class="note">note: {esc(note)}</p>')
    findings = ([("diagnosis", doc["diagnosis"])] if doc.get("diagnosis") else [])
    every = findings + [("hazard", h) for h in doc.get("hazards") or []]
    # one section per hazard found at the same places (NOTE [Folding repeated hazards])
    groups = {id(d): [d] for _, d in findings}
    for shown, group in fold(doc.get("hazards") or []):
        findings.append(("hazard", shown))
        groups[id(shown)] = group
    codes = _line_codes(doc, findings)
    for i, (role, d) in enumerate(findings):
        body.append(_finding(d, role, i, anchors, groups[id(d)]))
        if d.get("graph"):  # right under its finding: the stale node shows without scrolling
            body.append(graph_section(d, i, names, anchors, codes, role))
    held = memory_section(doc, anchors)  # holder paths: render/html_retention.py
    if held:
        body.append(held)
    stale = _stale_tensors(doc, every)
    if doc["storages"]:
        body.append(storage_map(doc, stale))
    if doc["tensors"]:
        body.append(_tensor_table(doc))
    if doc["events"]:
        body.append(timeline(doc, names, anchors, findings))
    content = (f'<div class="tensorscope"><style>{SCOPED_CSS}</style>\n' + "\n".join(parts)
               + "\n<main>\n" + "\n".join(body) + "\n</main>\n</div>\n")
    if fragment:
        return content
    title = f"tensorscope {doc['command']} {(doc.get('program') or {}).get('path') or '(error text)'}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>body{{margin:0;background:#fff}}</style></head>\n<body>\n"
            + content + "</body></html>\n")


def _scope(css: str) -> str:
    """CSS with every selector under ``.tensorscope`` (one rule per line), so that a page or a
    notebook embedding the report keeps its own styles."""
    rules = []
    for rule in css.strip().splitlines():
        selectors, body = rule.split("{", 1)
        scoped = ",".join(".tensorscope" if sel.strip() == ".tensorscope" else f".tensorscope {sel.strip()}"
                          for sel in selectors.split(","))
        rules.append(scoped + "{" + body)
    return "\n".join(rules)


def _verdict(doc: dict) -> str:
    p = doc.get("program")  # null for explain - / --message: nothing was run
    d = doc.get("diagnosis")
    hazards = doc.get("hazards") or []
    if d:
        cls, head = "fail", f"Diagnosis: {esc(d['kind'])}"
        sub = esc(d["title"])
    elif hazards:
        cls, head = "hazard", f"Hazard (nothing raised): {esc(hazards[0]['kind'])}"
        sub = esc(hazards[0]["title"])
    elif failed_children(doc):  # never "clean": see NOTE [Child processes]
        bad = failed_children(doc)
        cls, head = "fail", f"{len(bad)} child process{'es' if len(bad) != 1 else ''} failed"
        sub = esc(f"pid {', '.join(str(c['pid']) for c in bad)}: not recorded")
    else:
        cls = "ok"
        head = "Backward is clean, no hazard" if doc["command"] == "explain" else "No failure, no hazard"
        sub = ""
    if p is None:
        meta = [f"tensorscope {esc(doc['command'])}: explained from the error text alone"]
        p = {}
    else:
        meta = [f"tensorscope {esc(doc['command'])} <code>{esc(p['path'])}</code>",
                f"exit status {esc(p['exit_status'])}"]
    exc = p.get("exception")
    if exc:
        at = f" at {esc(exc.get('file') or '')}:{esc(exc['line'])}" if exc.get("line") else ""
        meta.append(f"{esc(exc['type'])}{at}")
    meta.append(f"torch {esc(doc['torch_version'])}" if doc.get("torch_version") is not None else "torch not imported")
    if doc.get("device_mode") and doc["device_mode"] != "auto":
        meta.append(f"device mode {esc(doc['device_mode'])}")
    if len(hazards) > (0 if d else 1):
        meta.append(f"{len(hazards)} hazard(s)")
    return (f'<header id="verdict" class="verdict {cls}" data-verdict="{cls}">'
            f"<h1>{head}</h1>" + (f"<div>{sub}</div>" if sub else "")
            + f'<div class="meta">{" · ".join(meta)}</div></header>')


SCOPED_CSS = _scope(_CSS.strip() + "\n" + GRAPH_CSS.strip() + "\n" + MEMORY_CSS.strip() + "\n")


# -- places and anchors ---------------------------------------------------------------------------

def _line_anchors(doc: dict) -> dict:
    """(file, line) -> the id of the first timeline row at that line, so places can link to it."""
    anchors: dict = {}
    for e in doc["events"]:
        key = (e.get("file"), e.get("line"))
        if key[1] and key not in anchors:
            anchors[key] = f"ev-{e['seq']}"
    return anchors


def _line_codes(doc: dict, findings) -> dict:
    """(file, line) -> its source text, from the events and the findings' places."""
    codes = {(e.get("file"), e.get("line")): e.get("code") or "" for e in doc["events"]}
    for _, d in findings:
        for pl in [d.get("culprit"), d.get("saved_by"), d.get("backward"), *(d.get("alias_chain") or [])]:
            if pl and pl.get("line") and pl.get("code"):
                codes.setdefault((pl.get("file"), pl["line"]), pl["code"])
    return codes


def _finding(d: dict, role: str, index: int, anchors: dict, group: list) -> str:
    rows = []
    for key, label in (("culprit", "culprit"), ("saved_by", "saved by"), ("backward", "backward")):
        pl = d.get(key)
        if not pl or not pl.get("line"):
            continue
        extra = []
        if pl.get("node"):
            extra.append(esc(pl["node"]))
        if pl.get("alias"):
            extra.append(f"through <code>{esc(pl['alias'])}</code>")
        if pl.get("library"):
            extra.append(f"inside {esc(pl['library'])}")
        rows.append(f'<tr class="{key.replace("_", "-")}"><th>{label}</th>'
                    f'<td class="place">{place_link(pl.get("file"), pl["line"], anchors)}</td>'
                    f'<td><code>{esc(pl.get("code"))}</code>'
                    + (f' ({", ".join(extra)})' if extra else "") + "</td></tr>")
    t = d.get("tensor")
    if t:
        label = ", ".join(t.get("names") or []) or t.get("id")
        versions = ""
        if t.get("version_at_save") is not None:
            versions = f" version at save {esc(t['version_at_save'])}, now {esc(t.get('version_now'))}"
        rows.append(f'<tr class="tensor"><th>tensor</th><td class="place">{esc(t.get("id"))}</td>'
                    f"<td><code>{esc(label)}</code>{versions}</td></tr>")
    parts = [f'<section class="diagnosis {role}" id="{role}-{index}" data-kind="{esc(d["kind"])}">',
             f'<h3>{"Diagnosis" if role == "diagnosis" else "Hazard (nothing raised)"}: '
             f'<span class="kind">{esc(d["kind"])}</span></h3>',
             f'<p><strong>{esc(d["title"])}</strong></p>']
    found = repeats(group)
    if found:
        parts.append(f'<p class="repeats" data-count="{len(group)}">{esc(found)}</p>')
    parts.append(f'<p>{esc(d["explanation"])}</p>')
    if rows:
        parts.append('<table class="places">' + "".join(rows) + "</table>")
    if d.get("alias_chain"):
        parts.append("<div><strong>alias chain</strong><ol class=\"chain\">" + "".join(
            f'<li>{place_link(c.get("file"), c.get("line"), anchors)} <code>{esc(c.get("code"))}</code>'
            f' <span class="what">{esc(c.get("what"))}</span></li>' for c in d["alias_chain"]) + "</ol></div>")
    for w in d.get("other_writes") or []:
        parts.append(f'<div class="other-write">also wrote {place_link(w.get("file"), w.get("line"), anchors)}'
                     f' <code>{esc(w.get("code"))}</code></div>')
    parts.append(f'<div class="fix"><strong>fix:</strong> {esc(d.get("fix"))}</div></section>')
    return "\n".join(parts)


def _stale_tensors(doc: dict, findings) -> set:
    """The tensors a finding is about, and every tensor sharing its version counter (its aliases)."""
    ids = {(d.get("tensor") or {}).get("id") for _, d in findings} - {None}
    for _, d in findings:
        for node in (d.get("graph") or {}).get("nodes") or []:
            ids.update(s["tensor"] for s in node.get("saved") or [] if s.get("stale") and s.get("tensor"))
    counters = {t["version_counter"] for t in doc["tensors"] if t["id"] in ids and t.get("version_counter")}
    return ids | {t["id"] for t in doc["tensors"] if t.get("version_counter") in counters}


# -- storage map ----------------------------------------------------------------------------------

def vc_colours(doc: dict) -> dict:
    return {v["id"]: PALETTE[i % len(PALETTE)] for i, v in enumerate(doc.get("version_counters") or [])}


def _overlaps(ranges: list) -> list:
    """Byte intervals covered by two or more of RANGES, merged: [(lo, hi, how_many_at_most)]."""
    points = sorted({p for r in ranges for p in r})
    out: list = []
    for lo, hi in zip(points, points[1:]):
        n = sum(1 for a, b in ranges if a <= lo and hi <= b)
        if n < 2:
            continue
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi, max(out[-1][2], n))
        else:
            out.append((lo, hi, n))
    return out


def storage_map(doc: dict, stale: set) -> str:
    """One SVG per storage (grouped by device): each tensor's byte range as a bar on one axis."""
    by_id = {t["id"]: t for t in doc["tensors"]}
    colours = vc_colours(doc)
    out = ['<section id="storage-map"><h2>Storage map</h2>',
           '<p>Each bar is the bytes of its storage a tensor can reach; bars are coloured '
           'by version-counter group; <span style="color:#cf222e">red bands</span> are bytes reached by '
           'more than one tensor; hatched bars have a stride 0 (elements share memory); a thick red '
           'outline marks the tensor a finding is about and its aliases.</p>']
    for device in sorted({s["device"] for s in doc["storages"]}):
        for s in (s for s in doc["storages"] if s["device"] == device):
            out.append(_storage_svg(s, by_id, colours, stale))
    out.append("</section>")
    return "\n".join(out)


def _storage_svg(s: dict, by_id: dict, colours: dict, stale: set) -> str:
    tensors = [by_id[tid] for tid in s["tensors"] if tid in by_id]
    ranges = [tuple(t["byte_range"]) for t in tensors if t.get("byte_range")]
    size = s.get("nbytes") or max((hi for _, hi in ranges), default=0) or 1
    x0 = _LABEL_W
    scale = _BAR_W / size
    width = x0 + _BAR_W + 300
    head = f"{s['id']}  {s['device']}  {size} bytes"
    if len(tensors) > 1:
        head += f"  shared by {len(tensors)} tensors"
    y = 16
    els = [f'<text x="0" y="{y}" font-weight="700">{esc(head)}</text>']
    y += 8
    # the storage itself, with the bytes reached by several tensors marked on it
    els.append(f'<rect class="track" x="{x0}" y="{y}" width="{_BAR_W}" height="10"/>')
    for lo, hi, n in _overlaps(ranges):
        els.append(f'<rect class="overlap" data-range="{lo},{hi}" data-count="{n}" x="{x0 + lo * scale:.1f}" '
                   f'y="{y}" width="{max(1.0, (hi - lo) * scale):.1f}" height="10">'
                   f"<title>bytes {lo}..{hi} reached by {n} tensors</title></rect>")
    els.append(f'<text class="muted" x="{x0 - 6}" y="{y + 9}" text-anchor="end">bytes 0..{size}</text>')
    y += 16
    defs = []
    for t in tensors:
        rng = t.get("byte_range")
        label = t["id"] + (" " + ", ".join(t["names"]) if t["names"] else "")
        stride0 = 0 in (t.get("stride") or [])
        vc = t.get("version_counter")
        colour = colours.get(vc, "#8c959f")
        cls = "bar" + (" stale-alias" if t["id"] in stale else "") + (" stride0" if stride0 else "")
        els.append(f'<text x="0" y="{y + 15}"><title>{esc(label)}</title>{esc(clip(label, 26))}</text>')
        els.append(f'<rect class="track" x="{x0}" y="{y + 3}" width="{_BAR_W}" height="{_ROW_H - 6}"/>')
        if rng:
            lo, hi = rng
            w = max(2.0, (hi - lo) * scale)
            fill = colour
            if stride0:  # hatched: many elements, few bytes
                pattern = f"hatch-{esc(s['id'])}-{esc(t['id'])}"
                defs.append(f'<pattern id="{pattern}" width="6" height="6" patternUnits="userSpaceOnUse" '
                            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{colour}"/>'
                            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="3"/></pattern>')
                fill = f"url(#{pattern})"
            els.append(
                f'<rect class="{cls}" data-tensor="{esc(t["id"])}" data-names="{esc(json.dumps(t["names"]))}" '
                f'data-storage="{esc(s["id"])}" '
                f'data-vc="{esc(vc)}" data-range="{lo},{hi}" data-stride0="{str(stride0).lower()}" '
                f'x="{x0 + lo * scale:.1f}" y="{y + 3}" width="{w:.1f}" height="{_ROW_H - 6}" fill="{fill}">'
                f"<title>{esc(label)}: bytes {lo}..{hi}, version counter {esc(vc)}</title></rect>")
            note = f"{lo}..{hi}  {vc or '-'}"
            if stride0:
                note += f"  stride 0: {t.get('nbytes')} bytes seen in {hi - lo}"
            els.append(f'<text class="{"stride0-note" if stride0 else "muted"}" x="{x0 + _BAR_W + 8}" '
                       f'y="{y + 15}">{esc(note)}</text>')
        y += _ROW_H
    return (f'<svg class="storage" data-storage="{esc(s["id"])}" width="{width}" height="{y + 6}" '
            f'viewBox="0 0 {width} {y + 6}" role="img" aria-label="{esc(head)}">'
            + (f"<defs>{''.join(defs)}</defs>" if defs else "") + "".join(els) + "</svg>")


# -- tensors and timeline -------------------------------------------------------------------------

def _shape(v) -> str:
    return "(" + ", ".join(str(x) for x in v) + ")" if v is not None else "?"


def _tensor_table(doc: dict) -> str:
    colours = vc_colours(doc)
    rows = []
    for t in doc["tensors"]:
        rng = t.get("byte_range")
        grad = "requires_grad" + (", leaf" if t.get("is_leaf") else "") if t.get("requires_grad") else "no grad"
        if t.get("grad_fn"):
            grad += f", {t['grad_fn']}"
        vc = t.get("version_counter")
        swatch = f'<span class="swatch" style="background:{colours[vc]}"></span>' if vc in colours else ""
        rows.append(
            f'<tr class="tensor{"" if t["alive"] else " dead"}" id="tensor-{esc(t["id"])}" data-tensor="{esc(t["id"])}">'
            f'<td>{esc(t["id"])}</td><td><code>{esc(", ".join(t["names"]))}</code>{"" if t["alive"] else " (not alive)"}</td>'
            f'<td>{esc(_shape(t.get("shape")))} / {esc(_shape(t.get("stride")))}</td>'
            f'<td>{esc(t.get("dtype"))} {esc(t.get("device"))}</td>'
            f'<td>{esc(t.get("storage") or "-")}' + (f" [{rng[0]}, {rng[1]})" if rng else "") + "</td>"
            f'<td>{esc(t.get("view_of") or "-")}</td><td>{swatch}{esc(t.get("version"))} {esc(vc or "")}</td>'
            f"<td>{esc(grad)}</td></tr>")
    return ('<section id="tensors"><h2>Tensors</h2><table class="grid"><thead><tr><th>id</th><th>names</th>'
            "<th>shape / stride</th><th>dtype device</th><th>storage bytes</th><th>view of</th>"
            "<th>version</th><th>autograd</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>")


def _highlights(findings) -> dict:
    """(file, line) -> the row class that marks it: culprit, chain, saved-by or backward-line."""
    marks: dict = {}
    for _, d in findings:
        for c in d.get("alias_chain") or []:
            marks.setdefault((c.get("file"), c.get("line")), "chain")
        # the culprit wins over the chain step it ends
        for key, cls in (("backward", "backward-line"), ("saved_by", "saved-by"), ("culprit", "culprit")):
            pl = d.get(key)
            if pl and pl.get("line"):
                marks[(pl.get("file"), pl["line"])] = cls
    return marks


def timeline(doc: dict, names: dict, anchors: dict, findings) -> str:
    marks = _highlights(findings)
    rows = []
    for e in doc["events"]:
        mark = marks.get((e.get("file"), e.get("line")))
        rows.append(
            f'<tr class="event{" " + mark if mark else ""}" id="ev-{esc(e["seq"])}" data-kind="{esc(e["kind"])}" '
            f'data-line="{esc(e.get("line"))}"><td>{esc(e["seq"])}</td>'
            f'<td class="loc">{esc(e.get("file") or "")}:{esc(e.get("line") or "")}</td>'
            f'<td><code>{esc(e.get("code"))}</code></td><td>{esc(_describe_event(e, names))}</td></tr>')
    sites = doc["events_summary"].get("sites") or []
    more = ""
    if sites:
        more = "<p>more events at: " + "; ".join(
            f"{esc(s.get('file') or '')}:{esc(s['line'])} {esc(s['kind'])} ×{esc(s['count'])}" for s in sites[:8]) + "</p>"
    return ('<section id="timeline"><h2>Timeline</h2><table class="grid"><thead><tr><th>#</th><th>file:line</th>'
            "<th>code</th><th>event</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>" + more + "</section>")
