"""Details on request: one tensor (``--tensor NAME``) or one source line (``--line FILE:LINE``)."""

from __future__ import annotations

import difflib

from rich.text import Text

from tensorscope import holder_path
from tensorscope.render.summary import line, site_counts

_REFS = ("tensor", "base", "source", "also_changed", "roots", "leaves_with_grad", "inputs", "outputs", "written")


def _refs(e) -> set:
    out = set()
    for k in _REFS:
        v = e.get(k)
        if isinstance(v, str):
            out.add(v)
        elif isinstance(v, list):
            out.update(x for x in v if isinstance(x, str))
    return out


def find(doc, query: str) -> list[dict]:
    """Tensors named ``query`` (or with that id), the live ones first."""
    hits = [t for t in doc["tensors"] if query == t["id"] or query in t["names"]]
    return sorted(hits, key=lambda t: not t["alive"])


def tensor_view(doc, query: str, describe) -> list:
    """History, aliases and version changes of one tensor; ``describe(event, names)`` words an event."""
    hits = find(doc, query)
    if not hits:
        names = sorted({n for t in doc["tensors"] for n in t["names"]})
        close = difflib.get_close_matches(query, names, n=5)
        msg = Text(f"no tensor named {query!r} in the report", style="yellow", end="\n")
        if close:
            msg.append(f"; did you mean: {', '.join(close)}")
        return [msg]
    names = {t["id"]: t["names"] for t in doc["tensors"]}
    out: list = []
    for t in hits:
        out.append(line((f"{t['id']} ", "bold"), (", ".join(t["names"]) or "(no name)", "bold"),
                        "" if t["alive"] else "  (not alive at the end)", crop=False))
        shape = "(" + ", ".join(str(s) for s in t.get("shape") or []) + ")"
        stride = "(" + ", ".join(str(s) for s in t.get("stride") or []) + ")"
        out.append(line(f"  shape {shape}, stride {stride}, {t.get('dtype')} {t.get('device')}, "
                        f"storage {t.get('storage')} bytes {t.get('byte_range')}, version {t.get('version')}, "
                        f"version counter {t.get('version_counter')}", crop=False))
        ag = f"  requires_grad {t.get('requires_grad')}, is_leaf {t.get('is_leaf')}, grad_fn {t.get('grad_fn')}"
        if t.get("has_grad") is not None and t.get("requires_grad"):
            ag += f", .grad {'set' if t['has_grad'] else 'None'}"
        if t.get("role"):
            ag += f", {t['role'].replace('_', ' ')}"
        out.append(line(ag, crop=False))
        if t.get("created"):
            c = t["created"]
            out.append(line(f"  created {c.get('file')}:{c.get('line')} ({c.get('how')})  ", (c.get("code") or "", "dim"),
                            crop=False))
        held = ((doc.get("memory") or {}).get("paths") or {}).get(t["id"])
        if held:
            out.append(line("  held by: " + holder_path.text(held), crop=False))
        aliases = []
        if t.get("view_of"):
            aliases.append(f"view of {t['view_of']} {', '.join(names.get(t['view_of']) or [])}".rstrip())
        for o in doc["tensors"]:
            if o["id"] == t["id"]:
                continue
            if o.get("view_of") == t["id"]:
                aliases.append(f"{o['id']} {', '.join(o['names'])} is a view of it".replace("  ", " "))
            elif t["alive"] and o["alive"] and o.get("storage") and o.get("storage") == t.get("storage"):
                same_vc = o.get("version_counter") == t.get("version_counter")
                aliases.append(f"{o['id']} {', '.join(o['names'])} shares storage {o['storage']}"
                               + (" and the version counter" if same_vc else ""))
        for a in aliases:
            out.append(line("  alias: " + a, crop=False))
        events = [e for e in doc["events"] if t["id"] in _refs(e)]
        if events:
            out.append(Text("  history:", style="bold", end="\n"))
        for e in events:
            out.append(line((f"    {e.get('file')}:{e.get('line')}  ", "cyan"), describe(e, names),
                            ("  " + (e.get("code") or ""), "dim"), crop=False))
        changes = [e for e in events if e["kind"] == "write" and e.get("tensor") == t["id"]]
        if changes:
            out.append(line("  version changes: " + ", ".join(
                f"{e.get('version_before')}->{e.get('version_after')} at line {e.get('line')}" for e in changes),
                crop=False))
    return out


def line_view(doc, where: str, describe) -> list:
    """Everything recorded at one source line, given as ``FILE:LINE`` or ``LINE``."""
    file, _, num = where.rpartition(":")
    try:
        ln = int(num)
    except ValueError:
        return [Text(f"--line expects FILE:LINE or LINE, not {where!r}", style="yellow", end="\n")]

    def matches(f):
        return not file or (f or "") == file or (f or "").endswith("/" + file) or (f or "").endswith(file)

    names = {t["id"]: t["names"] for t in doc["tensors"]}
    events = [e for e in doc["events"] if e.get("line") == ln and matches(e.get("file"))]
    counts = site_counts(doc)
    totals = {k: c for (f, l_, k), c in counts.items() if l_ == ln and matches(f)}
    if not events and not totals:
        return [Text(f"nothing was recorded at {where}", style="yellow", end="\n")]
    code = next((e.get("code") for e in events if e.get("code")), "")
    out: list = [line((where, "bold cyan"), "  ", code or "", crop=False)]
    out.append(line("  " + ", ".join(f"{k} x{n}" for k, n in totals.items()) +
                    (f"  ({len(events)} recorded in detail)" if sum(totals.values()) > len(events) else ""),
                    style="dim", crop=False))
    for e in events:
        out.append(line(f"  #{e.get('seq')}  ", describe(e, names), crop=False))
    return out
