"""The compact JSON form: the same facts as the full document, written smaller (docs/CONTRACT.md).

NOTE [The compact form]
A model with 20,000 live named tensors (parameters, gradients, Adam's two states) wrote a 12.6 MB
report, ~600 bytes a tensor, almost all of it repeated: each tensor record repeated its shape,
stride, dtype, flags and role, and each tensor that owns its storage alone had a storage record and
a version-counter record saying nothing the tensor record did not. The compact form (the JSON's
default; ``--full`` writes the full form) is lossless: :func:`expand` gives back the full document,
key for key, and :func:`compact` checks that it does before folding anything.

- ``tensors``: one row per tensor, ``[id, names, storage, version_counter, data_ptr, view_of, kind]``
  (``ROW``): what is its own, and ``kind``, an index into ``tensor_kinds``, which holds the other
  fields, shared by every tensor with the same shape, stride, dtype, version, flags, role and
  creation site (interned once; 20,000 Adam-trained parameters make 12 kinds). A row, not a record:
  the keys of 20,000 records alone were 1.3 MB. A view's base is its own (schema_version 4): in the
  kind, it made a kind per view (5,000 views of 5,000 parameters: 5,000 kinds, 1.4 MB of a 5.4 MB
  report); a row of schema_version 3 has no ``view_of`` (its kind holds it), and is read as such.
- ``storages``: a storage is listed when it holds more than one tensor, or more bytes than its one
  tensor reaches (a view pinning a larger storage), or starts elsewhere. The rest (one live tensor,
  all of its bytes) are that tensor's storage: its id, device, bytes and address are the tensor's.
- ``version_counters``: only counters shared by two or more tensors (views, ``detach``); a tensor's
  own counter is named in its record.
- ``form``: ``"compact"`` or ``"full"``.

Everything else (events, findings, the recording, memory) is written as in the full form: the
tables above are where the size was (8.6 + 2.4 + 0.8 of the 12.6 MB). Torch-free.
"""

from __future__ import annotations

from tensorscope.recording import PUBLIC_TENSOR_FIELDS
from tensorscope.report import SCHEMA_VERSION, memory_groups, memory_ids, skeleton

# A tensor's row in the compact form: its own fields, then the index of its kind (the other fields).
OWN = ("id", "names", "storage", "version_counter", "data_ptr", "view_of")
ROW = (*OWN, "kind")
_OWN_3 = OWN[:-1]  # a row of schema_version 3: view_of was its kind's
# The key order of a full tensor record (report.build), restored by expand.
_ORDER = ("id", "names", "alive", *PUBLIC_TENSOR_FIELDS, "view_of", "version_counter", "has_grad", "role", "created")
_RANK = {k: i for i, k in enumerate(_ORDER)}
_OWN_INDEX = {k: i for i, k in enumerate(OWN)}
_OWN_INDEX_3 = {k: i for i, k in enumerate(_OWN_3)}


def compact(doc: dict) -> dict:
    """The compact form of a full document (a new dict; ``doc`` is not changed). A document that is
    compact already, or whose tables would not come back exactly, is returned as it is."""
    if doc.get("form") != "full" or not doc.get("tensors"):  # compact already, or not a report of this version
        return doc
    tensors = doc["tensors"]
    kinds: list[dict] = []
    index: dict[str, int] = {}
    records = []
    for t in tensors:
        shared = {k: v for k, v in t.items() if k not in _OWN_INDEX}
        key = repr(shared)
        k = index.get(key)
        if k is None:
            k = index[key] = len(kinds)
            kinds.append(shared)
        records.append([t.get(f) for f in OWN] + [k])
    by_id = {t["id"]: t for t in tensors}
    storages = [s for s in doc.get("storages") or () if not _implied_storage(s, by_id)]
    counters = [c for c in doc.get("version_counters") or () if len(c.get("tensors") or ()) > 1]
    out = dict(doc)
    out.update(form="compact", tensor_kinds=kinds, tensors=records, storages=storages, version_counters=counters)
    if not _expands_to(out, doc):  # a record shape this module does not know: write it whole
        return doc
    return out


def expand(doc: dict) -> dict:
    """The full document of a compact one (a new dict); a full one is returned as it is."""
    if doc.get("form") != "compact":
        return doc
    tensors = list(_records(doc))
    listed = {s["id"]: dict(s, tensors=list(s["tensors"])) for s in doc.get("storages") or ()}
    storages = dict(listed)
    counters: dict[str, list] = {}
    for t in tensors:
        sid = t.get("storage")
        if sid and t.get("alive") and sid not in listed:
            storages[sid] = {"id": sid, "device": t.get("device"), "nbytes": t.get("nbytes"),
                             "data_ptr": t.get("data_ptr"), "tensors": [t["id"]]}
        if t.get("version_counter"):
            counters.setdefault(t["version_counter"], []).append(t["id"])
    storages = sorted(storages.values(), key=lambda s: _number(s["id"]))
    memory_groups(storages)
    out = dict(doc)
    out.update(form="full", tensor_kinds=[], tensors=tensors, storages=storages,
               version_counters=[{"id": k, "tensors": v} for k, v in sorted(counters.items(), key=lambda kv: _number(kv[0]))])
    return out


def tensor_ids(doc: dict):
    """The ids of a document's tensors, in order, in either form."""
    if doc.get("form") == "compact":
        return [row[0] for row in doc.get("tensors") or ()]
    return [t["id"] for t in doc.get("tensors") or ()]


def tensor_records(doc: dict):
    """A document's full tensor records, in order, in either form (one at a time for a compact one)."""
    if doc.get("form") == "compact":
        return _records(doc)
    return iter(doc.get("tensors") or ())


def _records(doc: dict):
    """The full tensor records of a compact document, one at a time, in order."""
    kinds = doc.get("tensor_kinds") or []
    own, own_index = (_OWN_3, _OWN_INDEX_3) if doc.get("schema_version") == 3 else (OWN, _OWN_INDEX)
    # per kind, once: the full record's keys in order, each with its place in a row (None: the kind's)
    slots = [[(k, own_index.get(k)) for k in sorted([*own, *kind], key=lambda k: _RANK.get(k, len(_RANK)))]
             for kind in kinds]
    for row in doc.get("tensors") or ():
        kind = kinds[row[-1]]
        yield {k: kind[k] if i is None else row[i] for k, i in slots[row[-1]]}


# NOTE [Checking the compact form without expanding it]
# compact() writes the compact form only if expand() gives back the full tables exactly. Expanding
# a 20,000-tensor report whole to compare it made 20,000 tensor records and 20,000 storage records
# more while the report was being written: the run's peak memory (+14 MB on many_params). The
# check below compares what expand() would give record by record instead, in expand's own order
# and with its own rules (_records, the storages the tensors imply, memory_ids, the counters), so
# it holds one record at a time, plus a tuple per storage and a list per counter.


def _expands_to(out: dict, doc: dict) -> bool:
    """``_tables(expand(out)) == _tables(doc)``, one record at a time."""
    full, storages, doc_counters = _tables(doc)
    if type(full) is not list or type(storages) is not list or type(doc_counters) is not list:
        return False  # expand() gives lists
    listed = {s["id"]: s for s in out.get("storages") or ()}
    implied: dict = {}  # storage id -> (device, data_ptr, nbytes, tensor id): expand's, the last tensor's
    counters: dict[str, list] = {}
    n = 0
    for t in _records(out):
        if n >= len(full) or t != full[n]:
            return False
        n += 1
        sid = t.get("storage")
        if sid and t.get("alive") and sid not in listed:
            implied[sid] = (t.get("device"), t.get("data_ptr"), t.get("nbytes"), t["id"])
        if t.get("version_counter"):
            counters.setdefault(t["version_counter"], []).append(t["id"])
    if n != len(full):
        return False
    ids = sorted([*listed, *implied], key=_number)
    spans = [(listed[i]["device"], listed[i].get("data_ptr"), listed[i].get("nbytes")) if i in listed
             else implied[i][:3] for i in ids]
    memory = memory_ids(spans)
    del spans
    if len(storages) != len(ids):
        return False
    for sid, m, s in zip(ids, memory, storages):
        if sid in listed:
            want = dict(listed[sid], tensors=list(listed[sid]["tensors"]))
        else:
            device, ptr, nbytes, tid = implied[sid]
            want = {"id": sid, "device": device, "nbytes": nbytes, "data_ptr": ptr, "tensors": [tid]}
        want["memory"] = m
        if want != s:
            return False
    return [{"id": k, "tensors": v} for k, v in sorted(counters.items(), key=lambda kv: _number(kv[0]))] == doc_counters


def upgrade(doc: dict) -> dict:
    """A saved report of an older schema_version that has the same facts (2: always the full form; 3:
    the full form is 4's) as the current document, in the full form."""
    if doc.get("schema_version") == 3:
        return dict(expand(doc), schema_version=SCHEMA_VERSION)
    if doc.get("schema_version") != 2:
        return doc
    keys = skeleton(command="run", program=None, torch_version=None, device_mode=None)
    out = {k: doc.get(k, v) for k, v in keys.items()}
    out.update((k, v) for k, v in doc.items() if k not in out)
    out.update(schema_version=SCHEMA_VERSION, form="full", tensor_kinds=[])
    return out


def _implied_storage(s: dict, by_id: dict) -> bool:
    """The storage is its one tensor's: all of its bytes, from its first byte."""
    if len(s.get("tensors") or ()) != 1:
        return False
    t = by_id.get(s["tensors"][0])
    return (t is not None and t.get("alive") and t.get("storage") == s["id"] and t.get("device") == s.get("device")
            and t.get("nbytes") == s.get("nbytes") and t.get("data_ptr") == s.get("data_ptr"))


def _tables(doc: dict) -> tuple:
    return doc.get("tensors"), doc.get("storages"), doc.get("version_counters")


def _number(ident: str) -> int:
    return int(ident[1:])
