"""Choosing the explanation for a run: the first failure, and every silent hazard."""

from __future__ import annotations

from tensorscope.analysis.common import Evidence, diagnosis, where

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


def evidence(doc: dict, tracker) -> Evidence:
    return Evidence(
        doc=doc, failure=tracker.failure, saved_failure=tracker.saved_failure, hazards=tracker.hazards,
        backwards=list(tracker.backwards), node_lines=tracker.node_lines,
        created=tracker.tensor_created, names=tracker.tensor_names, exception=doc["program"]["exception"],
        by_id={t["id"]: t for t in doc["tensors"]}, ddp_models=list(tracker.ddp_models),
    )


def attach(doc: dict, tracker, outcome) -> None:
    """Fill ``diagnosis`` and ``hazards`` of a report."""
    ev = evidence(doc, tracker)
    doc["diagnosis"] = diagnose(ev)
    if ev.hazards:
        from tensorscope.analysis import silent

        doc["hazards"] = [silent.explain(ev, h) for h in ev.hazards]
    else:
        doc["hazards"] = []


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
