"""The shapes an in-place write takes on its way to the verdict, named.

NOTE [The shapes of a write]
One in-place write is read three times: by its wrapper around the call (``PreWrite``, the state
before it ran), by the write log every write leaves (``LoggedWrite``, what the hook-free failure path
of stale.py and the gradient-hook check match a stale tensor against), and by the report (a plain
dict made by ``write_facts``: the ``writes``/``silent`` of a saved tensor, the failure's writes; the
same keys wherever a write is named). A write recorded in detail is also an event (``emit("write",
...)``), frozen into the Recording like every event.

``PreWrite`` and ``LoggedWrite`` are built on the hot path (every in-place write makes one of each)
as plain tuples in their fields' order and read by name through these NamedTuples (``_make``):
building a NamedTuple costs 0.6 us more than a tuple (``tuple.__new__`` of a subclass copies the
items once more; measured on Python 3.11), 1.2 us of a write's 7 us, where reading one by name
(``_make`` on the failure path, or unpacking all its fields) costs nothing the program pays for.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# the write log's bound (``Tracker.log_write``): the last 16 writes of each of the 4,096 storages written
# most recently (a few MB at most)
MAX_LOGGED_STORAGES = 4096
MAX_WRITES_PER_STORAGE = 16


class PreWrite(NamedTuple):
    """What the recorder read just before an in-place write ran (``Tracker.pre_write``)."""

    version: int  # the target's version before the write
    saved: list | None  # [(saved.Packed, its tensor's version)] saved on the target's storage (explain)
    mates: list | None  # [(tensor, version)] of the target's known storage-mates (a detailed write)
    frame: Any  # the program's innermost frame (None: called from a library only)
    detailed: bool  # recorded in full: an event, names, aliases (the per-line cap not reached)
    storage: int | None  # the storage key (None: a tensor without storage)
    sequence_nr: int  # autograd's next sequence number: nodes built before the write have lower ones
    line: int | None  # the line of ``frame``


class LoggedWrite(NamedTuple):
    """One entry of the write log (``Tracker.write_log``): plain values and code objects only; the
    source text is worked out on the failure path (see NOTE [Stale saved variable without hooks])."""

    sequence_nr: int  # autograd's next sequence number at the write
    version_before: int
    version_after: int
    op: str
    grad_enabled: bool
    code: Any  # the program's code object (None: from a library only)
    lasti: int | None  # its instruction offset: the exact call in the line
    line: int | None
    library_code: Any  # the library function's code, when the write ran inside one
    tensor: str | None  # the target's id, for a detailed write


def write_facts(op, file, line, segment, alias, library, version_before, version_after, grad_enabled,
                tensor, bumped, seq=None) -> dict:
    """A write as the report names it (one shape for every place a write is listed; ``seq``: the
    event sequence number of a write seen by a wrapper while recording)."""
    facts = {"op": op, "file": file, "line": line, "segment": segment, "alias": alias, "library": library,
             "version_before": version_before, "version_after": version_after, "grad_enabled": grad_enabled}
    if seq is not None:
        facts["seq"] = seq
    facts["tensor"] = tensor
    facts["bumped"] = bumped
    return facts

