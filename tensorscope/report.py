"""The report: one plain, JSON-ready document built from what a run recorded.

Torch-free by design (see the house style): it takes the frozen Recording of a run
(tensorscope/recording.py), and everything after it (analysis, renderers) works on
this document and that recording only.
"""

from __future__ import annotations

from array import array
from itertools import chain

from tensorscope.version import __version__
from tensorscope.recording import PUBLIC_TENSOR_FIELDS, Recording, group_add, plain, plain_shared
from tensorscope.source import code_at, display_path  # noqa: F401  (report.code_at, report.display_path: the callers' names)

SCHEMA_VERSION = 4  # 2: the `recording` object; 3: the compact form; 4: a view's base in its row (docs/CONTRACT.md)


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
    return [f"m{n}" for n in memory_numbers(spans)]


def memory_numbers(spans) -> list[int]:
    """``memory_ids`` as numbers (``m3`` is 3); a span may carry more fields after its first three. The
    report builds the id's string only for the storages it lists (a storage that one tensor spans whole is
    not listed: 20,000 strings fewer on a model of 5,000 parameters)."""
    return list(_memory_numbers([s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans]))


def _memory_numbers(devices: list, starts: list, sizes: list) -> array:
    """``memory_numbers`` of the spans given as three lists (device, data_ptr, nbytes), one place a storage.

    NOTE [Memory groups without a tuple a storage]
    The spans are sorted by start within each device (a list of indices per device, sorted by the start
    ints they hold already) and each is merged into the running union while it starts before the union's
    end; a group is numbered by its first storage in the given order. Spans of one start are taken in the
    given order rather than by their end: each begins before the other's end (a span has bytes), so they
    join one group either way and the numbers are the same. A sorted tuple of four a storage cost 2.4 MB
    at the peak of a report of 20,000 storages (benchmarks/RESULTS.md, "mem16, 2026-11-26").
    """
    n = len(starts)
    by_device: dict = {}
    for i in range(n):
        if starts[i] and sizes[i]:
            by_device.setdefault(devices[i] or "", []).append(i)
    parent = array("q", range(n))  # 8 bytes a storage: no int object of each index held

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for idx in by_device.values():  # groups never span two devices
        idx.sort(key=starts.__getitem__)  # stable: one start's spans in the given order
        last_end = last = None  # the running union's end, and one of its spans
        for i in idx:
            start = starts[i]
            end = start + sizes[i]
            if last is not None and start < last_end:
                parent[find(i)] = find(last)
                if end > last_end:
                    last_end = end
            else:
                last_end, last = end, i
    number = array("q", bytes(8 * n))  # a group's number at its root's place (0: not numbered yet), no dict
    out = array("q")
    groups = 0
    for i in range(n):
        root = find(i)
        if not number[root]:
            groups += 1
            number[root] = groups
        out.append(number[root])
    return out


# NOTE [The document's tensors as rows]
# ``build`` writes the tensors, storages and version counters in the compact form (NOTE [The compact
# form] in compact.py) as it goes: one row per tensor, and one shared record per kind of tensor (its
# geometry, flags, role and creation site), made the first time a tensor of that kind is met. A full
# record per tensor (a dict of 21 keys and three lists, ~1.2 KB) made first and folded by the JSON
# writer afterwards was the largest part of the report's memory on a model of 20,000 live tensors
# (+19 MB over the recording it is built from). A reader that wants one record per tensor (the
# explanations, the text and HTML forms, ``--full``, the Python API's ``Report.doc``) calls
# ``compact.expand``, which gives back the full document key for key; tests/test_json_writer.py
# compares the two.

#: The fields of a tensor's facts that its kind holds (the others, ``storage`` and ``data_ptr``, its row).
_KIND_FACTS = tuple(f for f in PUBLIC_TENSOR_FIELDS if f not in ("storage", "data_ptr"))


def _kind(alive, facts, has_grad, role, created) -> dict:
    """A tensor kind of the compact form: the fields of a full record that are not the tensor's own."""
    kind = {"alive": alive}
    for f in _KIND_FACTS:
        v = getattr(facts, f)
        kind[f] = list(v) if type(v) is tuple else v
    kind["has_grad"] = has_grad
    kind["role"] = role
    kind["created"] = ({"file": display_path(created["file"]), "line": created["line"],
                        "code": code_at(created["file"], created["line"]), "how": created["how"]}
                       if created else None)
    return kind


def _alive_set(snap) -> dict:
    """The snapshot's live ids as a dict used as a set: its ``has_grad`` itself, which has an entry for each live
    tensor (snapshot.take) and none other, when it is exactly that; else a dict of them (a hand-built
    recording). Not a second table of 20,000 ids at the report's peak memory (benchmarks/RESULTS.md, "rss21")."""
    has_grad, alive = snap.has_grad, snap.alive
    if type(has_grad) is dict and len(has_grad) == len(alive) and _strictly_in_tid_order(alive) and all(
            tid in has_grad for tid in alive):
        return has_grad  # no id twice in alive, each in has_grad, as many: the two sets are equal
    return dict.fromkeys(alive)  # a dict as a set: a third of a set's memory for 20,000 ids


def _strictly_in_tid_order(tids) -> bool:
    """True when ``tids`` are in the recording's order (by length, then by the string) with no id twice."""
    prev = None
    for tid in tids:
        if type(tid) is not str:
            return False
        if prev is not None and (len(prev) > len(tid) or len(prev) == len(tid) and prev >= tid):
            return False
        prev = tid
    return True


def build(recording: Recording, *, command: str, program: dict, torch_version: str, device_mode: str,
          distributed: dict | None = None, events: list | None = None, sites: list | None = None) -> dict:
    """Assemble the report document of a run (schema_version 4, see NOTE [One document skeleton]), its
    tensors in the compact form (NOTE [The document's tensors as rows]; ``compact.expand`` gives the full).

    ``diagnosis``, ``hazards`` and ``recording`` are filled afterwards by diagnose.attach.

    ``events``: the recording's events, given apart from it (its own are then not read) as a list this
    takes: each frozen event becomes the document's event itself (NOTE [Events handed over to the report]).
    ``sites``: the recording's sites, given apart the same way with ``events`` (a list this empties).
    """
    snap = recording.snapshot
    named = snap.named
    alive = _alive_set(snap)
    facts_of = recording.tensor_map()
    names_seen = recording.names
    # which tensors to describe: named ones, tensors seen with names at events, temporaries written through
    recorded = recording.events if events is None else events
    written = [e["tensor"] for e in recorded if e["kind"] == "write" and isinstance(e.get("tensor"), str)]
    # a dict as an ordered set: building the report stays linear in the number of tensors
    chosen: dict[str, None] = {}
    for tid in chain(named, names_seen, written):
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

    counters_of, has_grad, roles = snap.counters, snap.has_grad, snap.roles
    take = events is not None  # the command line's document: see NOTE [Events handed over to the report]
    created_at = recording.created
    # See NOTE [The document's tensors as rows]
    kinds: list[dict] = []
    index: dict = {}  # a kind's fields (hashable) -> its place in kinds
    rows = []
    storages: dict[str, object] = {}  # sid -> the facts of its first live tensor (no tuple a storage: its fields)
    more: dict[str, list] = {}  # sid -> the ids of its other live tensors
    counters: dict[str, object] = {}  # counter -> its tensor's id, or a list of the ids of its several
    for tid in chosen:
        facts = facts_of[tid]
        names = named.get(tid, ())
        seen = names_seen.get(tid)
        if seen and any(n not in names for n in seen):
            names = list(names)
            for n in seen:
                if n not in names:
                    names.append(n)
        elif not take or type(names) is not tuple:  # NOTE [A tensor's names, one tuple from the snapshot to the row]
            names = list(names)
        live = tid in alive
        created = created_at.get(tid)
        shared = (live, *[getattr(facts, f) for f in _KIND_FACTS],
                  has_grad.get(tid) if live else None, roles.get(tid),
                  (created["file"], created["line"], created["how"]) if created else None)
        try:
            k = index.get(shared)
        except TypeError:  # a hand-built recording with lists in it
            shared = repr(shared)
            k = index.get(shared)
        if k is None:
            k = index[shared] = len(kinds)
            kinds.append(_kind(live, facts, has_grad.get(tid) if live else None, roles.get(tid), created))
        counter = counters_of.get(tid)
        rows.append([tid, names, facts.storage, counter, facts.data_ptr, view_of.get(tid), k])
        if counter:  # a counter's one tensor as its id, a list from its second (only those are written)
            group_add(counters, counter, tid)
        sid = facts.storage
        if sid and live:
            if sid in storages:
                more.setdefault(sid, []).append(tid)
            else:
                storages[sid] = facts
    ids = sorted(storages, key=lambda s: int(s[1:]))
    firsts = [storages[sid] for sid in ids]
    del storages
    numbers = _memory_numbers([f.device for f in firsts], [f.storage_ptr for f in firsts],
                              [f.storage_nbytes for f in firsts])
    listed = []
    for sid, f, m in zip(ids, firsts, numbers):
        others = more.get(sid)
        # a storage whose one live tensor spans all of it is implied by the row (NOTE [The compact form])
        if others or not (f.nbytes == f.storage_nbytes and f.data_ptr == f.storage_ptr):
            listed.append({"id": sid, "device": f.device, "nbytes": f.storage_nbytes, "data_ptr": f.storage_ptr,
                           "tensors": [f.id, *(others or ())], "memory": f"m{m}"})
    del firsts, numbers, more

    # NOTE [Events handed over to the report]
    # The report's events are JSON-ready (the file as shown, the line's code added). The API's recording keeps
    # its own events (``events`` None), as the program may read it afterwards: each is copied (lists for
    # tuples). The command line hands its events and sites over instead (instrument.session.record's
    # ``release``, session._recorded), and nothing else holds them: each frozen event is made the document's
    # event in place (its tuples made lists, as ``plain`` makes them: readers of the document test for a list),
    # and each site goes once counted. A long program's 17,498 events were 6.9 MB frozen and 9.0 MB as copies,
    # and the copies, the events' table of every site (1.1 MB) and its recording's held the run's peak memory
    # (benchmarks/RESULTS.md, "mem17" and "mems18"). Equal code texts of several lines are one string (its
    # 20,000 lines are 8 texts, 1.1 MB as 17,500 strings).
    #
    # NOTE [Equal lists of a handed-over event shared]
    # A handed-over event's tuples of strings (a write's ``names``, ``also_changed``, ``also_bumped``; an empty
    # ``saved_hits``) become one list for each distinct value, shared by every event that has it: a write of
    # the generated script held three empty lists and a names list, 56 and 64 bytes each (2.3 MB for its
    # 10,000 writes; benchmarks/RESULTS.md, "mem19"). Only tuples whose members are all ``str`` are
    # shared: equal tuples of other values may differ in JSON (``(1,) == (True,)``). This is sound because
    # the command line's document is only read (rendered, diagnosed, written) and never given to the
    # program; readers must not change an event's list in place. The API's events are copies (``plain``),
    # one list each, as its caller may change them.
    take = events is not None
    recorded_sites = recording.sites if sites is None else sites
    # every site where some events were only counted (past the per-line or the total limit), with
    # its full count: the text report folds per line from these, the JSON keeps them all (counted before the
    # document's events are made, so that its table of every site is gone by then)
    # (kind, file) -> line -> events recorded there: the lines' ints are the events' own, where a key tuple a
    # line was 2 MB on a generated script's 17,500 lines, at the report phase's peak (RESULTS.md, "mem19")
    detailed: dict = {}
    for e in recorded:
        lines = detailed.get((e["kind"], e.get("file")))
        if lines is None:
            lines = detailed[(e["kind"], e.get("file"))] = {}
        line = e.get("line")
        lines[line] = lines.get(line, 0) + 1
    over = []
    nothing: dict = {}
    for i, s in enumerate(recorded_sites):
        if s.count > detailed.get((s.kind, s.file), nothing).get(s.line, 0):
            over.append(s)
        if sites is not None:
            sites[i] = None
    detailed = recorded_sites = None
    sites = sorted(
        ({"kind": s.kind, "file": display_path(s.file), "line": s.line, "code": code_at(s.file, s.line),
          "count": s.count} for s in over),
        key=lambda s: -s["count"])
    over = None
    events = []
    where = code = None
    texts: dict = {}  # a line's code -> the one string of it: a generated script repeats its lines
    lists: dict = {}  # a tuple of strings -> the one list of it (NOTE [Equal lists of a handed-over event shared])
    for i, e in enumerate(recorded):
        file, line = e.get("file"), e.get("line")
        if take:  # the frozen dict itself, its tuples as lists: what ``plain`` gives, without a second dict
            ev = e
            recorded[i] = None
            for k in [k for k, v in ev.items() if type(v) is tuple or type(v) is dict]:
                v = ev[k]
                if type(v) is tuple and all(type(x) is str for x in v):
                    same = lists.get(v)
                    if same is None:
                        same = lists[v] = list(v)
                    ev[k] = same
                else:
                    ev[k] = plain(v)
        else:
            ev = plain(e)
        if where != (file, line):  # a line's events in a row quote it with one string
            where, code = (file, line), code_at(file, line)
            code = texts.setdefault(code, code)
        ev["code"] = code
        ev["file"] = display_path(file)
        events.append(ev)
    e = ev = recorded = texts = lists = None
    doc = skeleton(command=command, program=program, torch_version=torch_version, device_mode=device_mode,
                   notes=recording.notes, distributed=distributed)
    doc.update(
        form="compact" if rows else "full",  # no tensors: the two forms are one
        tensor_kinds=kinds,
        tensors=rows,
        storages=listed,
        version_counters=[{"id": k, "tensors": v} for k, v in sorted(counters.items(), key=lambda kv: int(kv[0][1:]))
                          if type(v) is list],
        events=events,
        events_summary={"recorded": len(events), "aggregated": recording.aggregated,
                        "per_site_limit": recording.per_site, "max_events": recording.max_events, "sites": sites},
        optimizers=[{"name": o["name"], "type": o["type"], "parameters": list(o["parameters"]),
                     "state_keys": list(o["state_keys"])} for o in snap.optimizers],
        memory=plain_shared(snap.memory) if snap.memory is not None else None,  # docs/retention.md
    )
    return doc
