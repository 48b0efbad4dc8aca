"""The terminal form: a summary first (render/summary.py), details on request.

``renderables`` gives rich renderables for the CLI's own console (which detects the terminal's
width and colour); ``render`` gives a string (files, tests). Deterministic: ids like ``t3``/``s1``
and no raw addresses. Every string that comes from the program (source lines, names, messages)
is put in as ``Text``, never parsed as rich markup.
"""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tensorscope.compact import expand
from tensorscope.render import focus, summary
from tensorscope.render.fold import repeats

_BAR = 40


def renderables(doc: dict, *, full: bool = False, tensor: str | None = None, line: str | None = None,
                report: bool = False) -> list:
    """What the terminal report shows.

    Default: the summary. ``full``: every tensor, storage and event. ``tensor``: one tensor's
    history, aliases and version changes. ``line``: what one ``FILE:LINE`` did. ``explain`` shows
    its finding -- the verdict and the panels -- unless ``report`` asks for the report (a clean one
    is one verdict line and the report's notes; see NOTE [The finding on the last screen]). A pasted error text
    (``explain -``, ``--message``) is its one explanation panel, whatever the options.
    """
    if doc.get("message") is not None:
        return [message_panel(doc)]
    doc = expand(doc)  # one record per tensor (a run's document, or a saved report, may be compact)
    if tensor is not None:
        return [Group(*focus.tensor_view(doc, tensor, _describe_event))]
    if line is not None:
        return [Group(*focus.line_view(doc, line, _describe_event))]
    if full:
        return full_dump(doc)
    if doc.get("command") == "explain" and not report:
        # clean: the verdict, and the notes that say what the verdict does not cover (a subclass left out,
        # workers not recorded), so that "clean" is never read as more than was looked at
        return summary.findings(doc, diagnosis_panel) if summary.found(doc) else [summary.verdict(doc),
                                                                                 *summary.notes(doc, coverage=True)]
    return summary.renderables(doc, diagnosis_panel)


def render(doc: dict, *, width: int | None = None, color: bool | None = None, **options) -> str:
    """The report as a string: ``width`` columns (100 by default), colour only when ``color``."""
    buf = io.StringIO()
    console = Console(file=buf, width=width or 100, color_system="standard" if color else None,
                      force_terminal=bool(color), highlight=False, soft_wrap=False, emoji=False,
                      markup=False)
    for r in renderables(doc, **options):
        console.print(r)
    return buf.getvalue()


def full_dump(doc: dict) -> list:
    """Every tensor, storage and event: the complete report (``--full``)."""
    names = {t["id"]: t["names"] for t in doc["tensors"]}
    out: list = [Group(*summary.header(doc), summary.verdict(doc), *summary.notes(doc))]
    out.extend(summary.finding_panels(doc, diagnosis_panel))
    if doc["tensors"]:
        out.append(tensor_table(doc))
        out.append(storage_map(doc))
    if doc["events"]:
        out.append(timeline(doc, names))
    if doc["tensors"] or doc["events"]:
        out.append(Group(*summary.closing(doc)))
    return out


def _label(tid, names) -> str:
    if tid is None:
        return "?"
    n = names.get(tid) or []
    return f"{n[0]} ({tid})" if n else tid


def _quote(place: dict | None, label: str) -> Text | None:
    if not place or not place.get("line"):
        return None
    t = Text()
    t.append(f"{label:>9} ", style="bold")
    t.append(f"{place.get('file') or ''}:{place['line']}  ", style="dim")
    t.append(place.get("code") or "")
    extra = []
    if place.get("node"):
        extra.append(place["node"])
    if place.get("alias"):
        extra.append(f"through `{place['alias']}`")
    if place.get("library"):
        extra.append(f"inside {place['library']}")
    if extra:
        t.append("   (" + ", ".join(extra) + ")", style="cyan")
    return t


def diagnosis_panel(d: dict, heading: str, group: list | None = None) -> Panel:
    """One finding; ``group``: the hazards folded into it (render/fold.py), ``d`` among them."""
    parts = [Text(d["title"], style="bold")]
    found = repeats(group or [d])
    if found:
        parts.append(Text(found, style="yellow"))
    parts.append(Text(d["explanation"]))
    for place, label in ((d.get("culprit"), "culprit"), (d.get("saved_by"), "saved by"),
                         (d.get("backward"), "backward")):
        q = _quote(place, label)
        if q is not None:
            parts.append(q)
    if d.get("alias_chain"):
        chain = Text("alias chain: ", style="bold")
        chain.append(" -> ".join(f"`{c['code']}` line {c['line']}" for c in d["alias_chain"]))
        last = d["alias_chain"][-1]
        if last.get("what"):
            chain.append(f"  ({last['what']})", style="dim")
        parts.append(chain)
    for w in d.get("other_writes") or []:
        parts.append(Text(f"also wrote  line {w['line']}  {w.get('code', '')}", style="dim"))
    parts.append(Text.assemble(("fix: ", "bold green"), Text(d.get("fix") or "")))
    times = f" (x{len(group)})" if group and len(group) > 1 else ""
    return Panel(Group(*parts), title=Text(f"{heading}: {d['kind']}{times}"), border_style="red", expand=True)


def message_panel(doc: dict) -> Panel:
    """The explanation of a pasted error text (explain_text.document): what it decoded, the usual
    causes and fixes, and the command that finds the line."""
    d, m = doc["diagnosis"], doc["message"]
    parts = [Text(d["title"], style="bold"), Text(d["explanation"])]
    fields = {k: v for k, v in (m.get("fields") or {}).items() if v is not None}
    if fields:
        parts.append(Text("decoded: " + ", ".join(f"{k}={v}" for k, v in fields.items())))
    if d["causes"]:
        parts.append(Text("usual causes:", style="bold"))
        parts.extend(Text(f"  - {c}") for c in d["causes"])
    if d["fixes"]:
        parts.append(Text("fixes:", style="bold"))
        parts.extend(Text(f"  - {f}") for f in d["fixes"])
    parts.append(Text.assemble(("to pinpoint the line and the alias: ", "bold"), m["pinpoint"]))
    return Panel(Group(*parts), title=Text(f"explain: {d['kind']}"))


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if shape is not None else "?"


def tensor_table(doc) -> Table:
    table = Table(title="Tensors", title_justify="left", pad_edge=False, show_edge=False)
    table.add_column("tensor", overflow="fold", max_width=22)
    table.add_column("shape / stride", overflow="fold")
    table.add_column("dtype device", overflow="fold")
    table.add_column("storage bytes", overflow="fold")
    table.add_column("view of")
    table.add_column("version")
    table.add_column("autograd", overflow="fold")
    for t in doc["tensors"]:
        rng = t.get("byte_range")
        names = ", ".join(t["names"])
        label = f"{t['id']} {names}" if names else t["id"]
        if not t["alive"]:
            label += " †"
        autograd = "requires_grad" if t.get("requires_grad") else "no grad"
        if t.get("requires_grad"):
            autograd += ", leaf" if t.get("is_leaf") else ""
        if t.get("grad_fn"):
            autograd += f", {t['grad_fn']}"
        if t.get("has_grad") is not None and t.get("requires_grad"):
            autograd += ", .grad set" if t["has_grad"] else ", .grad None"
        table.add_row(*(Text(cell) for cell in (
            label,
            f"{_fmt_shape(t.get('shape'))} / {_fmt_shape(t.get('stride'))}",
            f"{t.get('dtype')} {t.get('device')}",
            f"{t.get('storage') or '-'} [{rng[0]}, {rng[1]})" if rng else str(t.get("storage") or "-"),
            t.get("view_of") or "-",
            f"{t.get('version')} {t.get('version_counter') or ''}".strip(),
            autograd,
        )))
    table.caption = Text("† not alive at the end (facts as last seen); version: value and counter group; "
                         ".grad shown for leaves only")
    table.caption_justify = "left"
    return table


def _yn(v) -> str:
    return "-" if v is None else ("yes" if v else "no")


def storage_map(doc) -> Group:
    """One block per storage; each tensor's byte range drawn as a bar, version-counter groups marked."""
    by_id = {t["id"]: t for t in doc["tensors"]}
    blocks = [Text("Storage map", style="bold")]
    devices = sorted({s["device"] for s in doc["storages"]})
    for device in devices:
        for s in (s for s in doc["storages"] if s["device"] == device):
            size = s.get("nbytes") or max((by_id[t]["byte_range"] or [0, 0])[1] for t in s["tensors"]) or 1
            head = Text(f"{s['id']}  {device}  {size} bytes", style="bold")
            if len(s["tensors"]) > 1:
                head.append(f"  shared by {len(s['tensors'])} tensors", style="yellow")
            blocks.append(head)
            for tid in s["tensors"]:
                t = by_id[tid]
                rng = t.get("byte_range") or [0, 0]
                lo = int(rng[0] * _BAR / size)
                hi = max(lo + 1, int(round(rng[1] * _BAR / size))) if rng[1] > rng[0] else lo
                bar = "." * lo + "#" * (hi - lo) + "." * max(0, _BAR - hi)
                name = ", ".join(t["names"]) or tid
                line = Text(f"  {tid:>4} [{bar[:_BAR]}] {rng[0]}..{rng[1]}  {name}")
                if t.get("stride") and 0 in (t.get("stride") or []):
                    line.append("  stride 0: elements share memory", style="cyan")
                line.append(f"  vc {t.get('version_counter') or '-'}", style="dim")
                blocks.append(line)
    return Group(*blocks)


def _describe_event(e, names) -> str:
    k = e["kind"]
    lab = lambda tid: _label(tid, names)  # noqa: E731
    if k == "create":
        return f"create {lab(e['tensor'])} by torch.{e['op']}" + (" (requires_grad)" if e.get("requires_grad") else "")
    if k == "alias":
        tids = e["tensor"] if isinstance(e["tensor"], list) else [e["tensor"]]
        vc = "shares version counter" if e.get("shares_version_counter") else "own version counter"
        return f"alias {', '.join(lab(t) for t in tids)} = {e['op']} of {lab(e.get('base'))} (same storage, {vc})"
    if k == "copy":
        if e.get("tensor") is None:
            return f"{e['op']}() of {lab(e.get('source'))}: value leaves autograd"
        src = f" of {lab(e['source'])}" if e.get("source") else ""
        rg = ", requires_grad" if e.get("requires_grad") else ""
        return f"copy {lab(e['tensor'])} = {e['op']}{src} (new storage{rg})"
    if k == "write":
        via = f" through `{e['alias']}`" if e.get("alias") else ""
        lib = f" inside {e['library']}" if e.get("library") else ""
        text = f"write {e['op']}{via} into {lab(e['tensor'])}{lib}: version {e.get('version_before')} -> {e.get('version_after')}"
        if e.get("source"):
            text += f" (values from {lab(e['source'])})"
        if e.get("also_changed"):
            bumped = set(e.get("also_bumped") or [])
            text += "; also changed " + ", ".join(
                lab(t) + ("" if t in bumped else " (its version did not move)") for t in e["also_changed"])
        if e.get("grad_enabled") is False:
            text += " (grad disabled)"
        return text
    if k == "requires_grad":
        return f"requires_grad of {lab(e['tensor'])} set to {e['value']} ({e.get('how')})"
    if k == "grad_mode":
        return f"{e['mode']} {e['action']} (grad {'enabled' if e.get('enabled') else 'disabled'})"
    if k == "sample":
        grad = "requires_grad" if e.get("requires_grad") else "no grad_fn"
        return f"{lab(e['tensor'])} = {e.get('distribution')}.{e['op']}() ({grad})"
    if k == "saved":
        return f"{lab(e['tensor'])} saved for backward at version {e['version']}" + (" (an output)" if e.get("output") else "")
    if k == "op":
        text = f"aten.{e['op']}({', '.join(lab(t) for t in e.get('inputs') or [])}) -> {', '.join(lab(t) for t in e.get('outputs') or []) or '-'}"
        if e.get("written"):
            text += f"; writes {', '.join(lab(t) for t in e['written'])}"
        if e.get("during_backward"):
            text += " (during backward)"
        return text
    if k == "backward":
        got = ", ".join(lab(t) for t in dict.fromkeys(e.get("leaves_with_grad") or [])) or "none"
        status = "ok" if e.get("ok") else "FAILED" if e.get("ok") is False else ""
        if e.get("leaves_walked") is False:  # see NOTE [Walking a large graph once per line]
            got += " (the leaves this line's first backward reached)"
        return f"{e['op']}() from {', '.join(lab(t) for t in e.get('roots', []))} {status}; leaves with .grad: {got}"
    return k


def timeline(doc, names) -> Table:
    table = Table(title="Timeline", title_justify="left", show_header=True, pad_edge=False)
    table.add_column("line", justify="right")
    table.add_column("code", overflow="fold", max_width=38)
    table.add_column("event", overflow="fold")
    for e in doc["events"]:
        table.add_row(Text(str(e.get("line") or "")), Text(e.get("code") or ""), Text(_describe_event(e, names)))
    sites = doc["events_summary"].get("sites") or []
    if sites:
        table.caption = Text("more events at: " + "; ".join(
            f"{s.get('file') or ''}:{s['line']} {s['kind']} x{s['count']}" for s in sites[:8]))
    return table
