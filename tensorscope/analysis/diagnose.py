"""Choosing the explanation for a run: the first failure, and every silent hazard."""

from __future__ import annotations

from tensorscope.analysis import backward_twice, device_mismatch, inplace, no_grad_fn, silent, simple
from tensorscope.analysis.common import Evidence, diagnosis, where

# kind code -> explain(ev) returning a diagnosis dict, or None to fall back to the generic one
EXPLAINERS = {
    inplace.CODE: inplace.explain,
    backward_twice.CODE: backward_twice.explain,
    no_grad_fn.CODE: no_grad_fn.explain,
    device_mismatch.CODE: device_mismatch.explain,
    **simple.EXPLAINERS,
}


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
        by_id={t["id"]: t for t in doc["tensors"]},
    )


def attach(doc: dict, tracker, outcome) -> None:
    """Fill ``diagnosis`` and ``hazards`` of a report."""
    ev = evidence(doc, tracker)
    doc["diagnosis"] = diagnose(ev)
    doc["hazards"] = [silent.explain(ev, h) for h in ev.hazards]


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
    parsed = _parse(text)
    ev.parsed = parsed
    code = parsed.kind if parsed is not None else "other"
    if failure is not None and failure.get("saved"):
        code = inplace.CODE
    explain = EXPLAINERS.get(code)
    if explain is not None:
        try:
            d = explain(ev)
        except Exception:  # a surprising program loses detail, never the report
            d = None
        if d is not None:
            return d
    return generic(ev, code, text)


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
    from tensorscope.explain.kinds import get

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
