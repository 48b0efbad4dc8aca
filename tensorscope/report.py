"""The report: one plain, JSON-ready document built from what a run recorded.

Torch-free by design (see the house style): it takes the recorder's plain data
and the end-of-run snapshot, and everything after it (analysis, renderers)
works on this document only.
"""

from __future__ import annotations

import io
import linecache
import os
import tokenize

from tensorscope import __version__

SCHEMA_VERSION = 1
_PUBLIC_TENSOR_FIELDS = ("shape", "stride", "dtype", "device", "storage", "storage_offset", "data_ptr",
                         "nbytes", "byte_range", "version", "requires_grad", "is_leaf", "grad_fn")


def code_at(file: str | None, line: int | None) -> str:
    """The source of a line as the report quotes it: stripped, without a trailing comment."""
    if not file or not line:
        return ""
    return without_comment(linecache.getline(file, line).strip())


def without_comment(text: str) -> str:
    if "#" not in text:
        return text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                return text[:tok.start[1]].rstrip() or text
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement
        pass
    return text


def display_path(file: str | None) -> str | None:
    if not file:
        return file
    try:
        rel = os.path.relpath(file)
    except ValueError:
        return file
    return file if rel.startswith("..") else rel


def build(*, command: str, tracker, snap: dict, program: dict, torch_version: str, device_mode: str) -> dict:
    """Assemble the report document (schema_version 1, see the JSON Schema in tensorscope/schema)."""
    named = snap["named"]
    alive = snap["alive"]
    # which tensors to describe: named ones, tensors seen with names at events, temporaries written through
    written = [e["tensor"] for e in tracker.events if e["kind"] == "write" and isinstance(e.get("tensor"), str)]
    # a dict as an ordered set: building the report stays linear in the number of tensors
    chosen: dict[str, None] = {}
    for tid in list(named) + list(tracker.tensor_names) + written:
        if tid in tracker.tensor_facts:
            chosen[tid] = None
    failure = tracker.failure or {}
    involved = [failure.get("tensor"), failure.get("base"), (failure.get("saved") or {}).get("tensor")]
    involved += [h.get("tensor") for h in tracker.hazards]
    for tid in involved:
        if isinstance(tid, str) and tid in tracker.tensor_facts:
            chosen[tid] = None
    # view_of may point at a tensor not otherwise chosen: include it
    view_of = dict(snap["view_of"])
    for tid, facts in tracker.tensor_facts.items():
        if facts.get("_view_of") and tid not in view_of:
            view_of[tid] = facts["_view_of"]
    for tid in list(chosen):
        base = view_of.get(tid)
        if base and base in tracker.tensor_facts:
            chosen[base] = None
    chosen = sorted(chosen, key=lambda s: int(s[1:]))

    tensors = []
    for tid in chosen:
        facts = tracker.tensor_facts[tid]
        names = list(named.get(tid, []))
        for n in tracker.tensor_names.get(tid, []):
            if n not in names:
                names.append(n)
        entry = {"id": tid, "names": names, "alive": tid in alive}
        for f in _PUBLIC_TENSOR_FIELDS:
            entry[f] = facts.get(f)
        entry["view_of"] = view_of.get(tid)
        entry["version_counter"] = snap["counters"].get(tid)
        entry["has_grad"] = snap["has_grad"].get(tid) if tid in alive else None
        entry["role"] = snap.get("roles", {}).get(tid)
        created = tracker.tensor_created.get(tid)
        entry["created"] = ({"file": display_path(created["file"]), "line": created["line"],
                             "code": code_at(created["file"], created["line"]), "how": created["how"]}
                            if created else None)
        tensors.append(entry)

    storages: dict[str, dict] = {}
    for entry in tensors:
        sid = entry["storage"]
        if not sid or not entry["alive"]:
            continue
        facts = tracker.tensor_facts[entry["id"]]
        s = storages.setdefault(sid, {"id": sid, "device": entry["device"], "nbytes": facts.get("_storage_nbytes"),
                                      "data_ptr": facts.get("_storage_ptr"), "tensors": []})
        s["tensors"].append(entry["id"])
    counters: dict[str, list] = {}
    for entry in tensors:
        if entry["version_counter"]:
            counters.setdefault(entry["version_counter"], []).append(entry["id"])

    events = []
    for e in tracker.events:
        ev = dict(e)
        ev["code"] = code_at(e.get("file"), e.get("line"))
        ev["file"] = display_path(e.get("file"))
        events.append(ev)
    # every site where some events were only counted (past the per-line or the total limit), with
    # its full count: the text report folds per line from these, the JSON keeps them all
    detailed: dict = {}
    for e in tracker.events:
        key = (e["kind"], e.get("file"), e.get("line"))
        detailed[key] = detailed.get(key, 0) + 1
    sites = sorted(
        ({"kind": k, "file": display_path(f), "line": line, "code": code_at(f, line), "count": n}
         for (k, f, line), n in tracker.site_counts.items() if n > detailed.get((k, f, line), 0)),
        key=lambda s: -s["count"])
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tensorscope_version": __version__,
        "torch_version": torch_version,
        "command": command,
        "program": program,
        "device_mode": device_mode,
        "tensors": tensors,
        "storages": sorted(storages.values(), key=lambda s: int(s["id"][1:])),
        "version_counters": [{"id": k, "tensors": v} for k, v in sorted(counters.items(), key=lambda kv: int(kv[0][1:]))],
        "events": events,
        "events_summary": {"recorded": len(events), "aggregated": tracker.aggregated,
                           "per_site_limit": tracker.per_site, "max_events": tracker.max_events, "sites": sites},
        "diagnosis": None,
        "hazards": [],
        "notes": list(tracker.notes),
        "optimizers": [{"name": o["name"], "type": o["type"], "parameters": o["parameters"],
                        "state_keys": o["state_keys"]} for o in snap.get("optimizers", [])],
    }
    return doc
