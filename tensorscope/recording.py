"""What one run recorded, as plain frozen data: the seam between instrument/ and everything after it.

instrument/ freezes its live tracker into a :class:`Recording` once the program has ended
(``instrument.session.record``); the report (report.py) and the analysis (analysis/) read only this.
Torch-free, and it imports nothing from instrument/: a test, or ``tensorscope explain report.json``,
builds one by hand or from a saved report.

Plain values only: str, int, float, bool, None, tuples and dicts with str keys of those. The
facts dicts (a failure, a hazard, a backward call, an event) are open: instrument/ adds keys as
it learns more, and the explanations read them with ``.get``, so they stay dicts rather than
one class per shape.

NOTE [The recording in the report]
The report's tables (tensors, events, sites) already carry most of a recording. What the
diagnosis reads beyond them is :class:`Facts`, written whole into the report as its ``recording``
object (schema_version 2). The run's own diagnosis is made from exactly that :class:`Facts` (not
from the larger live one), so re-explaining a saved report reads the same facts and gives the
same diagnosis. The source lines it quotes are recorded too (see NOTE [Recorded source]).

Example::

    rec = Recording.from_json(rec.to_json())   # exact round trip
    facts = Facts.from_json(doc["recording"])  # what `explain report.json` rebuilds
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Optional

#: The fields of a tensor's facts the report's tensors table shows (report.build).
PUBLIC_TENSOR_FIELDS = ("shape", "stride", "dtype", "device", "storage", "storage_offset", "data_ptr",
                        "nbytes", "byte_range", "version", "requires_grad", "is_leaf", "grad_fn")


def freeze(value: Any) -> Any:
    """``value`` as plain frozen data: lists and sets become tuples, dict keys strings, anything else ``str``.

    Linear in the size of ``value``; the common leaves (str, int, bool, None) cost one type check.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value
    if kind is dict or isinstance(value, dict):
        return {k if type(k) is str else str(k): freeze(v) for k, v in value.items()}
    if kind is list or kind is tuple or isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((freeze(v) for v in value), key=repr))
    if isinstance(value, (int, float, str)):  # bool-like and numeric subclasses (numpy scalars are not)
        return value
    return str(value)


def freeze_shared(value: Any, memo: dict | None = None) -> Any:
    """``freeze``, where a dict, list or tuple met more than once (the same object) is frozen once and its
    frozen value shared, as it was: the end-of-run ``memory`` object's 5,000 paths go through a few
    hundred step dicts (instrument/retention.py, ``held``), and frozen one by one they were 20,000 dicts
    more at the run's peak memory (benchmarks/RESULTS.md, "mem15, 2026-11-26"). Equal to ``freeze(value)``."""
    if memo is None:
        memo = {}
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value
    if kind is dict or kind is list or kind is tuple:
        done = memo.get(id(value))
        if done is not None:
            return done[1]
        if kind is dict:
            out = {k if type(k) is str else str(k): freeze_shared(v, memo) for k, v in value.items()}
        else:
            out = tuple(freeze_shared(v, memo) for v in value)
        memo[id(value)] = (value, out)  # the original held, so its id is not reused meanwhile
        return out
    return freeze(value)


def plain_shared(value: Any, memo: dict | None = None) -> Any:
    """``plain`` (frozen data as JSON-ready data), a dict or tuple met more than once made once and shared
    (see ``freeze_shared``). Equal to ``plain(value)``."""
    if memo is None:
        memo = {}
    kind = type(value)
    if kind is not tuple and kind is not dict:
        return value
    done = memo.get(id(value))
    if done is not None:
        return done[1]
    if kind is tuple:
        out = [plain_shared(v, memo) for v in value]
    else:
        out = {k: plain_shared(v, memo) for k, v in value.items()}
    memo[id(value)] = (value, out)
    return out


def group_add(groups: dict, key: Any, tid: str) -> None:
    """Add ``tid`` to ``groups[key]``, held as the one id while it is alone and as a list from its second:
    most storages and version counters have one tensor, and a list each would be a large part of the end-of-run
    tables on 20,000 tensors. Readers take a ``str`` as the one member."""
    mates = groups.get(key)
    if mates is None:
        groups[key] = tid
    elif type(mates) is str:
        groups[key] = [mates, tid]
    else:
        mates.append(tid)


def thaw(value: Any) -> Any:
    """A fresh mutable copy (tuples become lists): what the explanations get, so they never change a recording."""
    kind = type(value)
    if kind is dict:
        return {k: thaw(v) for k, v in value.items()}
    if kind is tuple:
        return [thaw(v) for v in value]
    return value


def _json(value: Any) -> Any:
    """Frozen data as JSON-ready data (tuples become lists)."""
    kind = type(value)
    if kind is tuple:  # a list of the tuple's size (a comprehension's grows by appends, 2 items in room for 4)
        out = list(value)
        for i, v in enumerate(out):
            if type(v) is tuple or type(v) is dict:
                out[i] = _json(v)
        return out
    if kind is dict:
        return {k: _json(v) for k, v in value.items()}
    return value


def plain(value: Any) -> Any:
    """Frozen data as JSON-ready data: tuples become lists (the report document's form)."""
    return _json(value)


def _tid_order(tid: str):
    return (len(tid), tid)


def _in_tid_order(tids) -> list:
    """``sorted(tids, key=_tid_order)`` without a key tuple a tensor: by the string, then stably by its length."""
    out = sorted(tids)
    out.sort(key=len)
    return out


def _collect_tids(value: Any, out: set) -> None:
    """Every tensor id (``t3``) named anywhere in ``value``."""
    kind = type(value)
    if kind is str:
        if len(value) > 1 and value[0] == "t" and value[1:].isdigit():
            out.add(value)
    elif kind is dict:
        for v in value.values():
            _collect_tids(v, out)
    elif kind is tuple or kind is list:
        for v in value:
            _collect_tids(v, out)


def referenced_seqs(value: Any, out: set) -> None:
    """Every autograd sequence nr named by a ``seq``/``seq_nr`` key anywhere in ``value`` (node lines to keep)."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():
            if (k == "seq" or k == "seq_nr") and type(v) is int:
                out.add(v)
            else:
                referenced_seqs(v, out)
    elif kind is tuple or kind is list:
        for v in value:
            referenced_seqs(v, out)


# --- the parts of a recording ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor as last seen (``describe`` in instrument/recorder.py), by its id ``t3``."""

    id: str
    shape: Optional[tuple] = None
    stride: Optional[tuple] = None
    dtype: Optional[str] = None
    device: Optional[str] = None
    storage: Optional[str] = None  # ``s1``: shared only among tensors alive at the same time
    storage_offset: Optional[int] = None
    data_ptr: Optional[int] = None
    nbytes: Optional[int] = None
    byte_range: Optional[tuple] = None
    version: Optional[int] = None
    requires_grad: Optional[bool] = None
    is_leaf: Optional[bool] = None
    grad_fn: Optional[str] = None
    is_view: bool = False
    view_of: Optional[str] = None  # the ``_base`` seen when it was described
    storage_nbytes: Optional[int] = None
    storage_ptr: Optional[int] = None


@dataclass(frozen=True, slots=True)
class Site:
    """A source line where events of one kind happened, and how many (recorded in detail or only counted)."""

    kind: str
    file: Optional[str]
    line: Optional[int]
    count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The end-of-run picture (instrument/snapshot.py): names, liveness, views, version counters."""

    named: dict = field(default_factory=dict)  # tid -> (names, ...) bound at the end of the run
    alive: tuple = ()  # tids alive at the end, in id order
    view_of: dict = field(default_factory=dict)  # tid -> tid of its base
    counters: dict = field(default_factory=dict)  # tid -> ``v1``: tensors sharing one version counter
    has_grad: dict = field(default_factory=dict)  # tid -> bool (a leaf's ``.grad`` is set) or None
    roles: dict = field(default_factory=dict)  # tid -> parameter / buffer / optimizer_state
    optimizers: tuple = ()  # {name, type, parameters, state_keys}
    memory: Optional[dict] = None  # the top holders of memory at the end (instrument/retention.py)


@dataclass(frozen=True, slots=True)
class Source:
    """NOTE [Recorded source]
    The text of one of the program's files as the diagnosis read it, so that re-explaining a saved
    report quotes (and parses) the same lines after the program changed or was deleted. A file over
    ``MAX_SOURCE_BYTES`` keeps only its hash: its lines are then read again at re-explain time only
    when the file's content still has that hash, and are otherwise treated as unavailable.
    """

    file: str  # absolute path, as the recorded facts name it
    sha256: str
    lines: Optional[tuple] = None  # the file's lines, line endings kept; None: too large, hash only

    @staticmethod
    def of(file: str, lines) -> "Source":
        text = "".join(lines)
        digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
        keep = tuple(lines) if len(text) <= MAX_SOURCE_BYTES else None
        return Source(file=file, sha256=digest, lines=keep)


MAX_SOURCE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Facts:
    """What a diagnosis reads beyond the report's tables: the report's ``recording`` object.

    See NOTE [The recording in the report].
    """

    failure: Optional[dict] = None  # the failure that ended the program, else the last one recorded (caught)
    saved_failure: Optional[dict] = None  # the stale saved tensor a backward unpacked
    hazards: tuple = ()  # raw silent-write facts, one per saved tensor
    backwards: tuple = ()  # the last backward calls (bounded), in order
    node_lines: tuple = ()  # (sequence nr, file, line): forward lines of the nodes the failure names
    created: dict = field(default_factory=dict)  # tid -> {file, line, how, source, ...}
    names: dict = field(default_factory=dict)  # tid -> (names seen at events), tensors outside the table
    ddp_models: tuple = ()  # one per DistributedDataParallel built
    nonfinite: Optional[dict] = None  # the first NaN/Inf at a sink and its origin (instrument/nonfinite.py)
    sources: tuple = ()  # Source, one per program file the diagnosis may read

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "sources":
                value = tuple({"file": s.file, "sha256": s.sha256, "lines": s.lines} for s in value)
            out[f.name] = _json(value)
        return out

    @staticmethod
    def from_json(data: dict) -> "Facts":
        """The facts of a saved report's ``recording`` object (KeyError/TypeError when malformed)."""
        if not isinstance(data, dict):
            raise TypeError("the recording is not an object")
        kwargs = {}
        for f in fields(Facts):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name == "sources":
                value = tuple(Source(file=s["file"], sha256=s["sha256"],
                                     lines=None if s.get("lines") is None else tuple(s["lines"]))
                              for s in value or ())
            else:
                value = freeze(value)
            kwargs[f.name] = value
        return Facts(**kwargs)

    def node_line_map(self) -> dict:
        return {seq: (file, line) for seq, file, line in self.node_lines}


@dataclass(frozen=True, slots=True)
class Recording:
    """Everything one run recorded, frozen when it ended (see the module's docstring)."""

    tensors: tuple = ()  # Tensor, in first-seen order
    names: dict = field(default_factory=dict)  # tid -> (names seen at events,)
    created: dict = field(default_factory=dict)  # tid -> {file, line, how, source, ...}: where it was made
    events: tuple = ()  # event dicts, in order (seq, kind, file, line, ...)
    sites: tuple = ()  # Site: every (kind, file, line) counted, with its full count
    aggregated: int = 0  # events only counted, past the per-site or the total limit
    per_site: int = 0
    max_events: int = 0
    failure: Optional[dict] = None
    saved_failure: Optional[dict] = None
    hazards: tuple = ()
    backwards: tuple = ()
    node_lines: tuple = ()  # (sequence nr, file, line)
    ddp_models: tuple = ()
    nonfinite: Optional[dict] = None
    notes: tuple = ()
    snapshot: Snapshot = field(default_factory=Snapshot)

    def tensor_map(self) -> dict:
        return {t.id: t for t in self.tensors}

    def facts(self, described, sources: tuple = ()) -> Facts:
        """The facts a diagnosis reads, for a report whose tensors table describes ``described`` (tids).

        Creation sites and names are kept for the tensors the failure, the hazards and the backward
        calls name, for the table's tensors, and along each one's chain of ``source`` tensors (the
        alias chain of an in-place failure); names only where the table has none of its own.
        """
        described = dict.fromkeys(described)  # a dict as a set: 20,000 ids in a third of a set's memory
        named = set()  # the tensors the failure, the hazards and the backward calls name
        for value in (self.failure, self.saved_failure, self.hazards, self.backwards, self.nonfinite):
            _collect_tids(value, named)
        extra = {tid for tid in named if tid not in described}
        named = None
        created = {}
        # which tensors' creations are kept does not depend on the order they are taken in (the dict is sorted
        # below): the described ones and the others, with no second set and no sort of 20,000 ids
        stack = list(described)
        stack.extend(extra)
        described = None
        while stack:
            tid = stack.pop()
            c = self.created.get(tid)
            if c is None or tid in created:
                continue
            created[tid] = c
            src = c.get("source")
            if type(src) is str:
                stack.append(src)
        names = {tid: self.names[tid] for tid in sorted(extra, key=_tid_order) if tid in self.names}
        return Facts(failure=self.failure, saved_failure=self.saved_failure, hazards=self.hazards,
                     backwards=self.backwards, node_lines=self.node_lines,
                     created={tid: created[tid] for tid in _in_tid_order(created)}, names=names,
                     ddp_models=self.ddp_models, nonfinite=self.nonfinite, sources=sources)

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "tensors":
                value = tuple({g.name: getattr(t, g.name) for g in fields(Tensor)} for t in value)
            elif f.name == "sites":
                value = tuple((s.kind, s.file, s.line, s.count) for s in value)
            elif f.name == "snapshot":
                value = {g.name: getattr(value, g.name) for g in fields(Snapshot)}
            out[f.name] = _json(value)
        return out

    @staticmethod
    def from_json(data: dict) -> "Recording":
        kwargs = {}
        for f in fields(Recording):
            if f.name not in data:
                continue
            value = freeze(data[f.name])
            if f.name == "tensors":
                value = tuple(Tensor(**t) for t in value)
            elif f.name == "sites":
                value = tuple(Site(*s) for s in value)
            elif f.name == "snapshot":
                value = Snapshot(**value)
            kwargs[f.name] = value
        return Recording(**kwargs)
