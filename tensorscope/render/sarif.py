"""The SARIF form (2.1.0): the diagnosis and each hazard as results for code-scanning tools.

One result per finding, at its culprit line (else the backward line, else the line that raised),
with the kind code as rule id; the rules are every kind of :mod:`tensorscope.kinds` with
its title. A diagnosis is an ``error``, a hazard a ``warning``. The forward line that saved the
tensor, the backward line and the alias chain are related locations. File URIs are relative to
the working directory (``%SRCROOT%``), as the report's paths are.

Example::

    >>> from tensorscope.render.sarif import render_sarif
    >>> log = json.loads(render_sarif(doc))
    >>> log["runs"][0]["results"][0]["ruleId"]
    'inplace-modified-saved-tensor'
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from tensorscope.version import __version__
from tensorscope.kinds import KINDS
from tensorscope.render.fold import fold, repeats

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_ROOT = "%SRCROOT%"


def render_sarif(doc: dict, *, root: str | None = None) -> str:
    """Render a report document as a SARIF 2.1.0 log (JSON text); ROOT defaults to the cwd."""
    codes = list(KINDS)
    rules = [_rule(KINDS[code]) for code in codes]
    findings = [(doc["diagnosis"], "error", [doc["diagnosis"]])] if doc.get("diagnosis") else []
    # one result per hazard found at the same places (NOTE [Folding repeated hazards])
    findings += [(h, "warning", group) for h, group in fold(doc.get("hazards") or [])]
    results = [_result(d, level, codes, doc, group) for d, level, group in findings]
    run = {
        "tool": {"driver": {"name": "tensorscope", "version": __version__,
                            "semanticVersion": __version__, "rules": rules}},
        "originalUriBaseIds": {_ROOT: {"uri": Path(root or os.getcwd()).resolve().as_uri() + "/"}},
        "results": results,
        "properties": {"command": doc["command"], "program": (doc.get("program") or {}).get("path"),
                       "exitStatus": (doc.get("program") or {}).get("exit_status"),
                       "torchVersion": doc["torch_version"]},
    }
    log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2) + "\n"


def _rule(kind) -> dict:
    return {
        "id": kind.code,
        "name": "".join(part.capitalize() for part in kind.code.split("-")),
        "shortDescription": {"text": kind.title},
        "fullDescription": {"text": kind.explanation},
        "help": {"text": "Fixes:\n" + "\n".join(f"- {fix}" for fix in kind.fixes)},
        "defaultConfiguration": {"level": "warning" if kind.hazard else "error"},
    }


def artifact_location(file: str) -> dict:
    """A report path as a SARIF artifactLocation: relative to %SRCROOT%, or an absolute file URI."""
    path = file.replace(os.sep, "/")
    if os.path.isabs(file):
        return {"uri": Path(file).as_uri()}
    return {"uri": quote(str(PurePosixPath(path)), safe="/"), "uriBaseId": _ROOT}


def _located(place: dict | None) -> bool:
    # "<stdin>" and "<string>" name no file a code-scanning tool could open
    return bool(place and place.get("line") and place.get("file") and not place["file"].startswith("<"))


def _location(place: dict, message: str | None = None, ident: int | None = None) -> dict:
    region = {"startLine": int(place["line"])}
    if place.get("code"):
        region["snippet"] = {"text": place["code"]}
    loc = {"physicalLocation": {"artifactLocation": artifact_location(place["file"]), "region": region}}
    if ident is not None:
        loc["id"] = ident
    if message:
        loc["message"] = {"text": message}
    return loc


def _result(d: dict, level: str, codes: list, doc: dict, group: list) -> dict:
    exc = (doc.get("program") or {}).get("exception")  # no program for explain - / --message
    primary = next((p for p in (d.get("culprit"), d.get("backward"), exc) if _located(p)), None)
    text = d["explanation"].rstrip()
    found = repeats(group)
    if found:
        text += f" ({found}.)"
    if d.get("fix"):
        text += f" Fix: {d['fix']}"
    result = {"ruleId": d["kind"], "level": level, "message": {"text": text}}
    if len(group) > 1:
        result["occurrenceCount"] = len(group)
    if d["kind"] in codes:
        result["ruleIndex"] = codes.index(d["kind"])
    if primary is not None:
        result["locations"] = [_location(primary)]
    related = []
    saved = d.get("saved_by")
    if _located(saved):
        node = f" ({saved['node']})" if saved.get("node") else ""
        related.append((saved, f"saved for backward here{node}: `{saved.get('code') or ''}`"))
    back = d.get("backward")
    if _located(back) and back is not primary:
        related.append((back, f"backward() here: `{back.get('code') or ''}`"))
    for step in d.get("alias_chain") or []:
        # the chain's last step is usually the culprit itself: no need to point at it twice
        if _located(step) and not (primary and (step["file"], step["line"]) == (primary["file"], primary["line"])):
            related.append((step, f"alias chain: `{step.get('code') or ''}` ({step.get('what') or ''})"))
    if related:
        result["relatedLocations"] = [_location(p, m, i) for i, (p, m) in enumerate(related, 1)]
    t = d.get("tensor")
    if t:
        result["properties"] = {"tensor": t.get("id"), "names": t.get("names") or [],
                                "versionAtSave": t.get("version_at_save"), "versionNow": t.get("version_now")}
    return result
