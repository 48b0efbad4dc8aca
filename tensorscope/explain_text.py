"""`tensorscope explain -` / `--message`: explain a pasted error text without running anything."""

from __future__ import annotations

import io
import sys

from tensorscope import __version__
from tensorscope.exitcodes import ExitCode
from tensorscope.report import SCHEMA_VERSION

_MAX_TEXT = 4 * 1024 * 1024


def document(text: str) -> dict:
    """The JSON document for a pasted error text.

    It has the shape of ``tensorscope explain PROGRAM --json`` (the same schema), so
    ``jq .diagnosis.kind`` reads all three forms: ``program`` is null (nothing ran),
    the tensor facts are empty, and ``message`` holds what was decoded from the text.
    ``diagnosis`` is null when the text is not a failure tensorscope knows.
    """
    from tensorscope.messages import describe, parse

    parsed = parse(text[-_MAX_TEXT:])
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tensorscope_version": __version__,
        "torch_version": None,  # the text may come from any release; nothing is imported or run
        "command": "explain",
        "program": None,
        "device_mode": None,
        "tensors": [], "storages": [], "version_counters": [], "events": [],
        "events_summary": {"recorded": 0, "aggregated": 0, "sites": []},
        "diagnosis": None,
        "hazards": [],
        "notes": ["explained from the error text alone: nothing was run"],
        "optimizers": [],
        "distributed": None,
        "message": None,
        "recording": None,  # nothing ran: nothing recorded
    }
    if parsed is None:
        doc["notes"].append("not a failure tensorscope knows (no PyTorch autograd/aliasing error found in the text)")
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


def explain_text(text: str, json_: bool, output) -> int:
    if not text.strip():
        sys.stderr.write("tensorscope: no error text given (pipe a traceback into `tensorscope explain -` "
                         "or pass --message TEXT)\n")
        return ExitCode.USAGE
    doc = document(text)
    if doc["diagnosis"] is None:
        sys.stderr.write("tensorscope: not a failure tensorscope knows (no PyTorch autograd/aliasing error "
                         "found in the text)\n")
        if json_:
            sys.stdout.write(_json(doc))
        return ExitCode.UNRECOGNISED
    if output is not None:  # the form -o's extension names, as for a program's report
        from tensorscope.render import form_for_path, render

        form = form_for_path(output)
        out = render_text(doc) if form == "text" else render(doc, form)
    else:
        out = _json(doc) if json_ else render_text(doc)
    if output is not None:
        with open(output, "w", encoding="utf-8") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
    return ExitCode.FOUND


def render_text(doc: dict) -> str:
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None, highlight=False)
    d, m = doc["diagnosis"], doc["message"]
    parts = [Text(d["title"], style="bold"), Text(d["explanation"])]
    fields = {k: v for k, v in (m.get("fields") or {}).items() if v is not None}
    if fields:
        parts.append(Text("decoded: " + ", ".join(f"{k}={v}" for k, v in fields.items())))
    if d["causes"]:
        parts.append(Text("usual causes:", style="bold"))
        parts.extend(Text(f"  - {c}") for c in d["causes"])
    if d["fixes"]:
        parts.append(Text("fixes:", style="bold"))
        parts.extend(Text(f"  - {f}") for f in d["fixes"])
    parts.append(Text.assemble(("to pinpoint the line and the alias: ", "bold"), m["pinpoint"]))
    console.print(Panel(Group(*parts), title=Text(f"explain: {d['kind']}")))
    return buf.getvalue()


def _json(doc: dict) -> str:
    """The document in the layout of every report (NOTE [JSON layout: one record per line])."""
    from tensorscope.render import json as json_form

    return json_form.render(doc)
