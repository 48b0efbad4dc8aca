"""`tensorscope explain -` / `--message`: explain a pasted error text without running anything."""

from __future__ import annotations

import io
import json
import sys

from tensorscope import __version__
from tensorscope.exitcodes import ExitCode

_MAX_TEXT = 4 * 1024 * 1024


def document(text: str) -> dict | None:
    """The JSON document for a pasted error text, or None when it is not a failure tensorscope knows."""
    from tensorscope.explain.messages import describe, parse

    parsed = parse(text[-_MAX_TEXT:])
    if parsed is None:
        return None
    d = describe(parsed)
    return {
        "schema_version": 1,
        "tensorscope_version": __version__,
        "command": "explain-text",
        "kind": d["kind"],
        "title": d["title"],
        "explanation": d["explanation"],
        "causes": list(d["causes"]),
        "fixes": list(d["fixes"]),
        "fields": d["fields"],
        "exception_type": parsed.exception_type,
        "message": parsed.message,
        "frames": parsed.frames,
        "pinpoint": _pinpoint(parsed),
    }


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
    if doc is None:
        sys.stderr.write("tensorscope: not a failure tensorscope knows (no PyTorch autograd/aliasing error "
                         "found in the text)\n")
        if json_:
            sys.stdout.write(json.dumps({"schema_version": 1, "command": "explain-text", "kind": None}) + "\n")
        return ExitCode.UNRECOGNISED
    as_json = str(output).endswith(".json") if output is not None else json_
    out = json.dumps(doc, indent=2) + "\n" if as_json else render_text(doc)
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
    parts = [Text(doc["title"], style="bold"), Text(doc["explanation"])]
    fields = {k: v for k, v in (doc.get("fields") or {}).items() if v is not None}
    if fields:
        parts.append(Text("decoded: " + ", ".join(f"{k}={v}" for k, v in fields.items())))
    if doc["causes"]:
        parts.append(Text("usual causes:", style="bold"))
        parts.extend(Text(f"  - {c}") for c in doc["causes"])
    if doc["fixes"]:
        parts.append(Text("fixes:", style="bold"))
        parts.extend(Text(f"  - {f}") for f in doc["fixes"])
    parts.append(Text.assemble(("to pinpoint the line and the alias: ", "bold"), doc["pinpoint"]))
    console.print(Panel(Group(*parts), title=f"explain: {doc['kind']}"))
    return buf.getvalue()
