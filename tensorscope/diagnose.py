"""A report's ``diagnosis``, ``hazards`` and ``recording``: filled from what the run recorded, or again from a
saved report, with the program's source as it was recorded (tensorscope/verdict.py chooses the explanations).

NOTE [A clean run loads no kind]
The kinds registry (33 modules) and the message patterns cost about 35 ms of CPU to import (measured on a
loaded 2-core machine), against a start-up overhead measured in hundredths of a second (README, Performance). A run with no failure, no
exception and no hazard has nothing to explain, so this module imports tensorscope.verdict only when
there is something to explain: the one deferred import of a light module that tests/test_layers.py allows.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import sysconfig
from contextlib import contextmanager
from dataclasses import replace

from tensorscope import source
from tensorscope.compact import expand, tensor_ids, tensor_records
from tensorscope.recording import Facts, Recording, Source
from tensorscope.report import SCHEMA_VERSION
from tensorscope.source import display_path


def attach(doc: dict, recording: Recording) -> Facts:
    """Fill ``diagnosis``, ``hazards`` and ``recording`` of a report built from ``recording``.

    The diagnosis is made from the facts written into the report (See NOTE [The recording in the
    report]), so that re-explaining the saved report gives the same one.
    """
    facts = recording.facts(tensor_ids(doc))
    if _may_read_source(facts, doc):
        facts = replace(facts, sources=_sources(facts, doc))
    # the files are read as they are now, which is what was just recorded: linecache is left alone
    # in the program's process (the API)
    explain(doc, facts, recorded=False)
    doc["recording"] = facts.to_json()
    return facts


def reexplain(doc: dict) -> None:
    """Diagnose a saved report again from its ``recording`` object, running nothing.

    Raises ValueError when ``doc`` is not a report this version can re-explain.
    """
    facts = facts_of(doc)
    if doc.get("recording") is None:
        return  # nothing ran (the program did not compile): the report says all there is
    explain(doc, facts)


def facts_of(doc) -> Facts:
    """The recorded facts of a saved report; ValueError (one line) when it has none."""
    if not isinstance(doc, dict) or "schema_version" not in doc or "program" not in doc or "tensors" not in doc:
        raise ValueError("not a tensorscope report (no schema_version, program and tensors)")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:  # a report of version 2 is upgraded first (compact.upgrade)
        raise ValueError(f"a report of schema_version {version!r} cannot be re-explained: it has no recording "
                         f"(schema_version {SCHEMA_VERSION} has one; run the program again)")
    data = doc.get("recording")
    if data is None:
        if doc.get("events") or doc.get("tensors"):
            raise ValueError("the report has no recording object: it cannot be re-explained")
        return Facts()  # nothing ran (the program did not compile): nothing to explain
    try:
        return Facts.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError("the report's recording object is malformed") from None


def explain(doc: dict, facts: Facts, recorded: bool = True) -> None:
    """``diagnosis`` and ``hazards`` of ``doc`` from ``facts``, reading the program's source as recorded
    (``recorded``) or as the files hold it now."""
    doc["diagnosis"], doc["hazards"] = None, []
    if not _may_read_source(facts, doc):
        return  # nothing failed and nothing is hazardous (NOTE [A clean run loads no kind])
    from tensorscope import verdict  # See NOTE [A clean run loads no kind]

    full = expand(doc)  # the explanations read one record per tensor (NOTE [The document's tensors as rows])
    with recorded_source(facts.sources if recorded else ()):
        verdict.explain(full, facts)
    doc["diagnosis"], doc["hazards"] = full["diagnosis"], full["hazards"]


def _may_read_source(facts: Facts, doc: dict) -> bool:
    """Whether there is anything to explain (and so to quote): a failure, an exception or a hazard."""
    return bool(facts.failure or facts.hazards or doc["program"].get("exception"))


def _sources(facts: Facts, doc: dict) -> tuple:
    """The program's files the diagnosis may read, as linecache holds them now (NOTE [Recorded source])."""
    files: dict[str, None] = {}
    _files_in(facts.to_json(), files)
    exc = doc["program"].get("exception") or {}
    for f in [exc.get("file")] + [e.get("file") for e in doc.get("events") or ()] \
            + [t["created"]["file"] for t in tensor_records(doc) if t.get("created")]:
        if f:
            files[f] = None
    installed = tuple({os.path.join(p, "") for k, p in sysconfig.get_paths().items()
                       if k in ("stdlib", "platstdlib", "purelib", "platlib")})
    out, seen, total = [], set(), 0
    for f in files:
        full = os.path.abspath(f)
        if full in seen or full.startswith(installed) or not os.path.isfile(full):
            continue
        seen.add(full)
        lines = linecache.getlines(f) or linecache.getlines(full)
        if lines:
            s = Source.of(full, lines)
            if s.lines is not None:
                total += sum(map(len, s.lines))
                if total > MAX_SOURCES_BYTES:  # a bound on the report's size: the rest by hash only
                    s = replace(s, lines=None)
            out.append(s)
    return tuple(sorted(out, key=lambda s: s.file))


MAX_SOURCES_BYTES = 1024 * 1024


def _files_in(value, out: dict) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and (k == "file" or k.endswith("_file")):
                out[v] = None
            else:
                _files_in(v, out)
    elif isinstance(value, list):
        for v in value:
            _files_in(v, out)


@contextmanager
def recorded_source(sources):
    """Let the explanations read the program's files as they were recorded (See NOTE [Recorded source]).

    Each recorded file is put in linecache under its absolute path and the path the report shows,
    and taken out again afterwards. A file recorded by hash only is read from disk when its content
    still has that hash, and is otherwise empty: no line of another version of it is ever quoted.
    """
    saved = {}
    try:
        for s in sources:
            lines = s.lines
            if lines is None:
                try:
                    with open(s.file, encoding="utf-8", errors="surrogateescape", newline="") as f:
                        text = f.read()
                except OSError:
                    text = None
                ok = text is not None and hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest() == s.sha256
                lines = tuple(text.splitlines(keepends=True)) if ok else ()
            for key in {s.file, display_path(s.file), os.path.relpath(s.file) if os.path.isabs(s.file) else s.file}:
                if key not in saved:
                    saved[key] = linecache.cache.get(key)
                # mtime None: linecache.checkcache leaves the entry alone
                linecache.cache[key] = (sum(map(len, lines)), None, list(lines), key)
                source.forget(key)
        yield
    finally:
        for key, entry in saved.items():
            if entry is None:
                linecache.cache.pop(key, None)
            else:
                linecache.cache[key] = entry
            source.forget(key)
