"""Choosing the explanation for a run: the failure that ended the program, and every hazard, from its recorded facts.

The driver over the kinds registry (tensorscope/kinds/__init__.py): it decodes the message, asks the
kind's explainer (a failure kind's ``explain(ev)``, a hazard kind's ``explain(ev, hazard)``) and falls
back on the kind's own words. It knows no kind by its logic: a new kind plugs in through the registry.
tensorscope/diagnose.py calls it with the program's source as recorded.
"""

from __future__ import annotations

from tensorscope import kinds
from tensorscope.kinds._base import Evidence, diagnosis, where
from tensorscope.messages import parse
from tensorscope.recording import Facts, thaw

#: A failure that carries a saved-tensor record (the tracker caught a version mismatch) is this kind,
#: whatever its message says.
SAVED_TENSOR_KIND = "inplace-modified-saved-tensor"


def explain(doc: dict, facts: Facts) -> None:
    """Fill ``diagnosis`` and ``hazards`` of ``doc`` from ``facts``."""
    ev = evidence(doc, facts)
    doc["diagnosis"] = diagnose(ev)
    # a hazard kind may find nothing left to say (a NaN the diagnosis already explains; a kept value
    # that is not read again)
    doc["hazards"] = [d for d in (explain_hazard(ev, h) for h in ev.hazards) if d is not None]


def _parse(text: str):
    try:
        return parse(text)
    except Exception:  # a surprising message loses its kind, never the report
        return None


def evidence(doc: dict, facts: Facts) -> Evidence:
    """The explanations' view of a report and its recorded facts (mutable copies: nothing they do
    changes the recording)."""
    return Evidence(
        doc=doc, failure=thaw(facts.failure), saved_failure=thaw(facts.saved_failure), hazards=thaw(facts.hazards),
        backwards=thaw(facts.backwards), node_lines=facts.node_line_map(),
        created=thaw(facts.created), names=thaw(facts.names), exception=doc["program"]["exception"],
        by_id={t["id"]: t for t in doc["tensors"]}, ddp_models=thaw(facts.ddp_models),
        nonfinite=thaw(facts.nonfinite),
    )


def explain_hazard(ev: Evidence, hazard: dict) -> dict | None:
    """The diagnosis of one recorded hazard, by the explainer of the hazard kind it names."""
    return kinds.HAZARD_EXPLAINERS[hazard.get("kind") or kinds.SILENT_WRITE](ev, hazard)


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
        code = SAVED_TENSOR_KIND
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

    The tracker records the failure that ended the program, or else the last a wrapped call
    raised (NOTE [The last failure, not the first] in instrument/recorder.py); a program may
    catch it (``try: loss.backward() except RuntimeError: ...``) and then exit 0, exit
    through ``sys.exit``, or die of another exception. Only the same type with the same text
    is the same failure: a caught one is never the diagnosis.
    """
    if exc is None:
        return False
    limit = 2000  # the tracker keeps the first 2,000 characters of the message
    return (failure.get("exception_type") == exc.get("type")
            and (failure.get("message") or "")[:limit] == (exc.get("message") or "")[:limit])


def generic(ev: Evidence, code: str, text: str) -> dict:
    """A diagnosis from the kind's knowledge and the line that raised."""
    kind = kinds.get(code)
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
    return diagnosis(kind, explanation=explanation, fix=kind.fixes[0] if kind.fixes else "", culprit=culprit,
                     backward=backward, evidence=[f"exception: {text[:300]}"])
