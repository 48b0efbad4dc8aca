"""The report: one plain, JSON-ready document built from what a run recorded.

Torch-free by design (see the house style): it takes the frozen Recording of a run
(tensorscope/recording.py), and everything after it (analysis, renderers) works on
this document and that recording only.
"""

from __future__ import annotations

from tensorscope.version import __version__
from tensorscope.recording import PUBLIC_TENSOR_FIELDS, Recording, plain
from tensorscope.source import code_at, display_path  # noqa: F401  (report.code_at, report.display_path: the callers' names)

SCHEMA_VERSION = 3  # 2: the `recording` object; 3: the compact form (see docs/CONTRACT.md)


def skeleton(*, command: str, program: dict | None, torch_version: str | None, device_mode: str | None,
             notes=(), distributed: dict | None = None) -> dict:
    """The report document with nothing recorded: every top-level key, in the order the JSON writes them.

    NOTE [One document skeleton]
    Every surface writes this one document (docs/CONTRACT.md, the JSON Schema in tensorscope/schema):
    ``run`` and ``explain`` of a program and the Python API fill it with ``build``; a program that
    did not compile, an API block whose report could not be built and a pasted error text
    (explain_text.document) use it as it is, so a key is added here once and appears in all of them
    (tests/test_document.py compares the key sets of every surface's document).
    """
    return {
        "schema_version": SCHEMA_VERSION,
        "tensorscope_version": __version__,
        "torch_version": torch_version,
        "command": command,
        "form": "full",  # the JSON writes the compact form unless --full (NOTE [The compact form])
        "program": program,
        "device_mode": device_mode,
        "tensor_kinds": [],  # the compact form's shared tensor fields (tensorscope/compact.py)
        "tensors": [],
        "storages": [],
        "version_counters": [],
        "events": [],
        "events_summary": {"recorded": 0, "aggregated": 0, "per_site_limit": 0, "max_events": 0, "sites": []},
        "diagnosis": None,  # these three are filled by diagnose.attach when something ran
        "hazards": [],
        "notes": list(notes),
        "optimizers": [],
        "recording": None,
        "distributed": distributed,
        "message": None,  # what explain_text.document decoded from a pasted error text
        "memory": None,  # what the program's names hold at the end (instrument/retention.py, docs/retention.md)
    }


# NOTE [Memory groups]
# A storage id (``s1``) names one StorageImpl. Distinct storages can read the same bytes:
# ``torch.from_numpy(a)`` and ``torch.as_tensor(a)`` of one array, ``torch.from_numpy(t.numpy())``,
# two ``torch.frombuffer`` over one buffer, DLPack. Each storage of the report carries ``memory``
# (``m1``): storages on one device whose byte ranges ``[data_ptr, data_ptr + nbytes)`` overlap get
# the same id, so shared memory is visible while both storage objects stay listed. Ids in the
# order of the storages' ids; a storage of unknown address or size is a group of its own.


def memory_groups(storages) -> None:
    """Set ``memory`` on each storage dict (see NOTE [Memory groups]); linear after one sort."""
    storages = sorted(storages, key=lambda s: int(s["id"][1:]))
    for s, m in zip(storages, memory_ids([(s["device"], s.get("data_ptr"), s.get("nbytes")) for s in storages])):
        s["memory"] = m


def memory_ids(spans) -> list[str]:
    """The ``memory`` id of each storage given as (device, data_ptr, nbytes), in the order of the
    storages' ids (see NOTE [Memory groups]); tuples, so a check of a large report makes no dicts."""
    group: dict[int, int] = {}
    ordered = sorted((device or "", ptr, ptr + nbytes, i) for i, (device, ptr, nbytes) in enumerate(spans)
                     if ptr and nbytes)
    parent = list(range(len(spans)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    last = None  # (device, end, index) of the running union
    for device, start, end, i in ordered:
        if last is not None and last[0] == device and start < last[1]:
            parent[find(i)] = find(last[2])
            last = (device, max(end, last[1]), last[2])
        else:
            last = (device, end, i)
    out = []
    for i in range(len(spans)):
        root = find(i)
        if root not in group:
            group[root] = len(group) + 1
        out.append(f"m{group[root]}")
    return out


def build(recording: Recording, *, command: str, program: dict, torch_version: str, device_mode: str,
          distributed: dict | None = None) -> dict:
    """Assemble the report document of a run (schema_version 3, see NOTE [One document skeleton]).

    ``diagnosis``, ``hazards`` and ``recording`` are filled afterwards by diagnose.attach.
    """
    snap = recording.snapshot
    named = snap.named
    alive = set(snap.alive)
    facts_of = recording.tensor_map()
    names_seen = recording.names
    # which tensors to describe: named ones, tensors seen with names at events, temporaries written through
    written = [e["tensor"] for e in recording.events if e["kind"] == "write" and isinstance(e.get("tensor"), str)]
    # a dict as an ordered set: building the report stays linear in the number of tensors
    chosen: dict[str, None] = {}
    for tid in list(named) + list(names_seen) + written:
        if tid in facts_of:
            chosen[tid] = None
    failure = recording.failure or {}
    involved = [failure.get("tensor"), failure.get("base"), (failure.get("saved") or {}).get("tensor")]
    involved += [h.get("tensor") for h in recording.hazards]
    for tid in involved:
        if isinstance(tid, str) and tid in facts_of:
            chosen[tid] = None
    # view_of may point at a tensor not otherwise chosen: include it
    view_of = dict(snap.view_of)
    for t in recording.tensors:
        if t.view_of and t.id not in view_of:
            view_of[t.id] = t.view_of
    for tid in list(chosen):
        base = view_of.get(tid)
        if base and base in facts_of:
            chosen[base] = None
    chosen = sorted(chosen, key=lambda s: int(s[1:]))

    tensors = []
    counters_of, has_grad, roles = snap.counters, snap.has_grad, snap.roles
    for tid in chosen:
        facts = facts_of[tid]
        names = list(named.get(tid, ()))
        for n in names_seen.get(tid, ()):
            if n not in names:
                names.append(n)
        entry = {"id": tid, "names": names, "alive": tid in alive}
        for f in PUBLIC_TENSOR_FIELDS:
            v = getattr(facts, f)
            entry[f] = list(v) if type(v) is tuple else v
        entry["view_of"] = view_of.get(tid)
        entry["version_counter"] = counters_of.get(tid)
        entry["has_grad"] = has_grad.get(tid) if tid in alive else None
        entry["role"] = roles.get(tid)
        created = recording.created.get(tid)
        entry["created"] = ({"file": display_path(created["file"]), "line": created["line"],
                             "code": code_at(created["file"], created["line"]), "how": created["how"]}
                            if created else None)
        tensors.append(entry)

    storages: dict[str, dict] = {}
    for entry in tensors:
        sid = entry["storage"]
        if not sid or not entry["alive"]:
            continue
        facts = facts_of[entry["id"]]
        s = storages.setdefault(sid, {"id": sid, "device": entry["device"], "nbytes": facts.storage_nbytes,
                                      "data_ptr": facts.storage_ptr, "tensors": []})
        s["tensors"].append(entry["id"])
    memory_groups(storages.values())
    counters: dict[str, list] = {}
    for entry in tensors:
        if entry["version_counter"]:
            counters.setdefault(entry["version_counter"], []).append(entry["id"])

    events = []
    for e in recording.events:
        ev = plain(e)
        ev["code"] = code_at(e.get("file"), e.get("line"))
        ev["file"] = display_path(e.get("file"))
        events.append(ev)
    # every site where some events were only counted (past the per-line or the total limit), with
    # its full count: the text report folds per line from these, the JSON keeps them all
    detailed: dict = {}
    for e in recording.events:
        key = (e["kind"], e.get("file"), e.get("line"))
        detailed[key] = detailed.get(key, 0) + 1
    sites = sorted(
        ({"kind": s.kind, "file": display_path(s.file), "line": s.line, "code": code_at(s.file, s.line),
          "count": s.count}
         for s in recording.sites if s.count > detailed.get((s.kind, s.file, s.line), 0)),
        key=lambda s: -s["count"])
    doc = skeleton(command=command, program=program, torch_version=torch_version, device_mode=device_mode,
                   notes=recording.notes, distributed=distributed)
    doc.update(
        tensors=tensors,
        storages=sorted(storages.values(), key=lambda s: int(s["id"][1:])),
        version_counters=[{"id": k, "tensors": v} for k, v in sorted(counters.items(), key=lambda kv: int(kv[0][1:]))],
        events=events,
        events_summary={"recorded": len(events), "aggregated": recording.aggregated,
                        "per_site_limit": recording.per_site, "max_events": recording.max_events, "sites": sites},
        optimizers=[{"name": o["name"], "type": o["type"], "parameters": list(o["parameters"]),
                     "state_keys": list(o["state_keys"])} for o in snap.optimizers],
        memory=plain(snap.memory) if snap.memory is not None else None,  # docs/retention.md
    )
    return doc
