"""Choosing the explanation for a run: the first failure, and every silent hazard, from its recorded facts."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

from tensorscope.analysis.common import Evidence, diagnosis, where
from tensorscope.recording import Facts, Recording, Source, thaw
from tensorscope.report import SCHEMA_VERSION

# The kinds (28 modules) and their explainers are imported only when there is something to
# explain: a clean run's report does without them (start-up, see README Performance).


def __getattr__(name):
    if name == "EXPLAINERS":  # kind code -> explain(ev) returning a diagnosis dict, or None for the generic one
        from tensorscope import kinds

        return kinds.EXPLAINERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _parse(text: str):
    try:
        from tensorscope.explain.messages import parse
    except ImportError:  # pragma: no cover
        return None
    try:
        return parse(text)
    except Exception:
        return None


def evidence(doc: dict, facts: Facts) -> Evidence:
    """The explanations' view of a report and its recorded facts (mutable copies: nothing they do
    changes the recording)."""
    return Evidence(
        doc=doc, failure=thaw(facts.failure), saved_failure=thaw(facts.saved_failure), hazards=thaw(facts.hazards),
        backwards=thaw(facts.backwards), node_lines=facts.node_line_map(),
        created=thaw(facts.created), names=thaw(facts.names), exception=doc["program"]["exception"],
        by_id={t["id"]: t for t in doc["tensors"]}, ddp_models=thaw(facts.ddp_models),
    )


def attach(doc: dict, recording: Recording) -> Facts:
    """Fill ``diagnosis``, ``hazards`` and ``recording`` of a report built from ``recording``.

    The diagnosis is made from the facts written into the report (See NOTE [The recording in the
    report]), so that re-explaining the saved report gives the same one.
    """
    facts = recording.facts((t["id"] for t in doc["tensors"]))
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
    if version != SCHEMA_VERSION:
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
    with recorded_source(facts.sources if recorded else ()):
        ev = evidence(doc, facts)
        doc["diagnosis"] = diagnose(ev)
        doc["hazards"] = []
        if ev.hazards:  # the explainers are imported only when there is something to explain
            doc["hazards"] = explain_hazards(ev)


def explain_hazards(ev) -> list:
    """One diagnosis per hazard: a saved tensor's silent write (no ``kind`` in its facts), else the
    kind module named by its ``kind`` (``explain_hazard(ev, facts)``, None when it finds nothing)."""
    from tensorscope import kinds
    from tensorscope.analysis import silent

    out = []
    for h in ev.hazards:
        code = h.get("kind")
        d = silent.explain(ev, h) if code is None else kinds.MODULE_OF[code].explain_hazard(ev, h)
        if d is not None:
            out.append(d)
    return out


def _may_read_source(facts: Facts, doc: dict) -> bool:
    """Whether a diagnosis could quote the program: there is a failure, an exception or a hazard."""
    return bool(facts.failure or facts.hazards or doc["program"].get("exception"))


def _sources(facts: Facts, doc: dict) -> tuple:
    """The program's files the diagnosis may read, as linecache holds them now (NOTE [Recorded source])."""
    import linecache
    import os
    import sysconfig

    files: dict[str, None] = {}
    _files_in(facts.to_json(), files)
    exc = doc["program"].get("exception") or {}
    for f in [exc.get("file")] + [e.get("file") for e in doc.get("events") or ()] \
            + [t["created"]["file"] for t in doc.get("tensors") or () if t.get("created")]:
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
    import hashlib
    import linecache
    import os

    from tensorscope.analysis import source as source_mod
    from tensorscope.report import display_path

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
                source_mod.forget(key)
        yield
    finally:
        for key, entry in saved.items():
            if entry is None:
                linecache.cache.pop(key, None)
            else:
                linecache.cache[key] = entry
            source_mod.forget(key)


def diagnose(ev: Evidence) -> dict | None:
    failure = ev.failure
    exc = ev.exception
    if failure is not None and not ended_the_program(failure, exc):
        failure = ev.failure = None  # the program caught that one; explain what ended it, if anything
    if failure is not None:
        text = f"{failure.get('exception_type')}: {failure.get('message')}"
    elif exc is not None and exc.get("type") not in ("KeyboardInterrupt", "SystemExit"):
        text = f"{exc.get('type')}: {exc.get('message')}"
    else:
        return None
    from tensorscope import kinds
    from tensorscope.analysis import inplace

    parsed = _parse(text)
    ev.parsed = parsed
    code = parsed.kind if parsed is not None else "other"
    if failure is not None and failure.get("saved"):
        code = inplace.CODE
    if code == "other":  # kinds seen in the evidence rather than in the message (a None `.grad` used ...)
        code = next((c for c, seen in kinds.RECOGNISERS.items() if _safely(seen, ev)), code)
    explain = kinds.EXPLAINERS.get(code)
    if explain is not None:
        try:
            d = explain(ev)
        except Exception:  # a surprising program loses detail, never the report
            d = None
        if d is not None:
            return d
    return generic(ev, code, text)


def _safely(recognise, ev) -> bool:
    try:
        return bool(recognise(ev))
    except Exception:  # a surprising program loses the kind, never the report
        return False


def ended_the_program(failure: dict, exc: dict | None) -> bool:
    """Whether the recorded failure is the exception that ended the program.

    The tracker records the first failure a wrapped call raised; a program may catch it
    (``try: loss.backward() except RuntimeError: ...``) and then exit 0, exit through
    ``sys.exit``, or die of another exception. Only the same type with the same text is
    the same failure: a caught one is never the diagnosis.
    """
    if exc is None:
        return False
    limit = 2000  # the tracker keeps the first 2,000 characters of the message
    return (failure.get("exception_type") == exc.get("type")
            and (failure.get("message") or "")[:limit] == (exc.get("message") or "")[:limit])


def generic(ev: Evidence, code: str, text: str) -> dict:
    """A diagnosis from the kind's knowledge and the line that raised."""
    from tensorscope.kinds import get

    kind = get(code)
    failure = ev.failure or {}
    exc = ev.exception or {}
    file, line = failure.get("file"), failure.get("line")
    if not line:
        file, line = exc.get("file"), exc.get("line")
    culprit = where(file, line, alias=failure.get("alias"))
    backward = where(file, line) if failure.get("where") == "backward" else None
    message = text.split(": ", 1)[-1]
    explanation = kind.explanation
    if code == "other":
        explanation = f"The program raised {text.split(':', 1)[0]}: {message}"
    return diagnosis(code, explanation=explanation, fix=kind.fixes[0] if kind.fixes else "", culprit=culprit,
                     backward=backward, evidence=[f"exception: {text[:300]}"])
