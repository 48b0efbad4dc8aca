"""`tensorscope explain -` / `--message`: the report document of a pasted error text (nothing runs).

Only the decoding lives here (the text -> the kind, its fields, the frames); reading the text,
writing the report and choosing the exit code are cli.py's, drawing it is render/text.py's.
"""

from __future__ import annotations

from tensorscope import report
from tensorscope.messages import describe, parse

MAX_TEXT = 4 * 1024 * 1024  # only the end of a longer text is read (the error is at the end)
UNRECOGNISED = "not a failure tensorscope knows (no PyTorch autograd/aliasing error found in the text)"


def document(text: str) -> dict:
    """The JSON document for a pasted error text.

    It has the shape of ``tensorscope explain PROGRAM --json`` (the same schema, see NOTE [One
    document skeleton]), so ``jq .diagnosis.kind`` reads all three forms: ``program`` is null
    (nothing ran), the tensor facts are empty, and ``message`` holds what was decoded from the text.
    ``diagnosis`` is null when the text is not a failure tensorscope knows.
    """
    parsed = parse(text[-MAX_TEXT:])
    # torch_version: the text may come from any release; nothing is imported or run
    doc = report.skeleton(command="explain", program=None, torch_version=None, device_mode=None,
                          notes=["explained from the error text alone: nothing was run"])
    if parsed is None:
        doc["notes"].append(UNRECOGNISED)
        return doc
    d = describe(parsed)
    doc["diagnosis"] = {
        "kind": d["kind"], "title": d["title"], "explanation": d["explanation"],
        # a pasted text names no line of the program for certain: `pinpoint` runs it to find them
        "culprit": None, "saved_by": None, "backward": None, "tensor": None,
        "other_writes": [], "alias_chain": [],
        "fix": d["fixes"][0] if d["fixes"] else "",
        "evidence": list(d.get("evidence") or []),
        "causes": list(d["causes"]), "fixes": list(d["fixes"]),
    }
    doc["message"] = {
        "exception_type": parsed.exception_type, "message": parsed.message, "fields": d["fields"],
        "frames": parsed.frames, "pinpoint": _pinpoint(parsed),
    }
    return doc


def _pinpoint(parsed) -> str:
    """The command that would find the exact line: the script of the outermost user frame, if known."""
    for frame in parsed.frames or []:
        f = frame.get("file") or ""
        if f.endswith(".py") and "site-packages" not in f and "/torch/" not in f:
            return f"tensorscope explain {f}"
    return "tensorscope explain your_script.py"
