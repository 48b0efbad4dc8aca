"""What a kind module holds, and the small torch-free helpers the kind modules share.

A kind module (``tensorscope/kinds/<code with underscores>.py``) defines ``KIND`` (a
:class:`Kind`), and optionally ``PATTERNS`` (message regexes with their decoders),
``advise(fields)`` (concrete wording from decoded message fields), ``explain(ev)``
(a diagnosis from the report's evidence) and ``recognise(ev)`` (whether the
evidence shows this kind when no message pattern names it). An explainer reads :class:`Evidence`,
starts from ``site(ev)`` or ``opening(ev)`` and returns ``diagnosis(KIND, ...)`` with places made by
``where``. The message wording several kinds decode (tensor type names, node names, devices) is in
``_message.py``; the fixes several kinds propose are in ``_fixes.py``.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

from tensorscope import source
from tensorscope.source import code_at, display_path


@dataclass(frozen=True)
class Kind:
    """One failure kind: what happened, why autograd cares, causes and fixes."""

    code: str
    title: str
    explanation: str
    causes: tuple[str, ...]
    fixes: tuple[str, ...]
    hazard: bool = False


@dataclass(frozen=True)
class Pattern:
    """A message regex (a string, compiled by the parser) and the decoder of its match."""

    regex: str
    decode: Callable[[re.Match], Optional[dict]] = lambda m: {}


@dataclass
class Evidence:
    """Everything an explanation may look at: the report and its recorded facts (``tensorscope.recording.Facts``,
    as mutable copies; tensorscope/verdict.py builds it, never from the live tracker)."""

    doc: dict
    failure: dict | None
    saved_failure: dict | None
    hazards: list
    backwards: list
    node_lines: dict
    created: dict
    names: dict
    exception: dict | None
    parsed: object | None = None
    by_id: dict = field(default_factory=dict)
    ddp_models: list = field(default_factory=list)  # one per DistributedDataParallel built (instrument/ddp.py)
    nonfinite: dict | None = None  # the first NaN/Inf at a sink and its origin (instrument/nonfinite.py)

    def tensor_names(self, tid: str | None) -> list[str]:
        if not tid:
            return []
        t = self.by_id.get(tid)
        if t is not None and t["names"]:
            return list(t["names"])
        return list(self.names.get(tid, []))

    def label(self, tid: str | None) -> str:
        names = self.tensor_names(tid)
        if names:
            return f"`{names[0]}`"
        t = self.by_id.get(tid) if tid else None
        base = t.get("view_of") if t else None
        if base and self.tensor_names(base):
            return f"tensor {tid} (a view of `{self.tensor_names(base)[0]}`)"
        return f"tensor {tid}" if tid else "a tensor"


def where(file: str | None, line: int | None, **extra) -> dict | None:
    """A place as a diagnosis names it: the shown path, the line and its code (None without a line)."""
    if not line:
        return None
    d = {"file": display_path(file), "line": line, "code": code_at(file, line)}
    d.update(extra)
    return d


def diagnosis(kind: Kind, *, explanation: str, fix: str, culprit=None, saved_by=None, backward=None,
              tensor=None, other_writes=None, alias_chain=None, title: str | None = None,
              evidence: list | None = None, graph: dict | None = None) -> dict:
    """A diagnosis object of ``kind`` (the kind module's ``KIND``) with the stable fields of the JSON contract.
    Its prose quotes messages as plain text: terminal escape codes in them are left out (``plain``)."""
    return {
        "kind": kind.code,
        "title": plain(title or kind.title),
        "explanation": plain(explanation),
        "culprit": culprit,
        "saved_by": saved_by,
        "backward": backward,
        "tensor": tensor,
        "other_writes": other_writes or [],
        "alias_chain": alias_chain or [],
        "fix": plain(fix),
        "evidence": [plain(e) if isinstance(e, str) else e for e in evidence or []],
        "graph": graph,
    }


# NOTE [Terminal escape codes in a quoted message]
# Some messages carry ANSI escape codes of their own: torch 2.6+'s ``torch.load`` weights_only
# UnpicklingError makes "do those steps only if you trust the source of the checkpoint" bold with ESC[1m ...
# ESC[0m (checked on 2.6.0, 2.9.1, 2.13.0 and 2.15.0; 2.2.2 has no such error). Python prints the traceback
# with them, as it must; a diagnosis that quotes the message printed them raw inside its rich panel (rich
# puts text in as it is: "^[[1m" in a file, a broken frame on a terminal) and in the JSON, HTML and SARIF
# forms. The diagnosis's prose is tensorscope's own, so the codes (CSI sequences such as colours, and the
# other two-character escapes) are left out of it; ``program.exception.message`` keeps the text as raised.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")


def plain(text):
    """``text`` without terminal escape codes (NOTE [Terminal escape codes in a quoted message])."""
    return _ESCAPES.sub("", text) if isinstance(text, str) and "\x1b" in text else text


def w(phrase: str) -> str:
    """Return a regex for ``phrase`` where each space matches any whitespace run.

    NOTE [Wrapped messages]: terminals, log files and issue comments break long
    messages over lines, so a space in a phrase matches any run of whitespace.
    """
    return r"\s+".join(re.escape(word) for word in phrase.split(" "))


def site(ev) -> tuple[Optional[str], Optional[int], dict]:
    """``(file, line, failure)``: where the failure was raised (the tracker's, else the exception's)."""
    f = ev.failure or {}
    if f.get("line"):
        return f.get("file"), f.get("line"), f
    exc = ev.exception or {}
    return exc.get("file"), exc.get("line"), f


def tensor_of(ev: Evidence, tid: str | None, names=None) -> dict | None:
    """The ``tensor`` object of a diagnosis: the tensor's id, names and version now."""
    if not tid:
        return None
    return {"id": tid, "names": list(names or []) or ev.tensor_names(tid), "version_at_save": None,
            "version_now": (ev.by_id.get(tid) or {}).get("version")}


def created_at(ev: Evidence, tid: str | None) -> dict | None:
    """Where the program created tensor ``tid`` (file, line, how), when a line was recorded."""
    c = ev.created.get(tid) if tid else None
    if c and c.get("line"):
        return c
    return None


def name_of(ev: Evidence, f: dict) -> str:
    """The name the program knows the failure's tensor by, else the alias it was reached through."""
    names = f.get("names") or ev.tensor_names(f.get("tensor"))
    return names[0] if names else (f.get("alias") or "the tensor")


def message(ev) -> str:
    f = ev.failure or {}
    exc = ev.exception or {}
    return f.get("message") or exc.get("message") or ""


def fields(ev) -> dict:
    return dict(ev.parsed.fields) if getattr(ev, "parsed", None) is not None else {}


def statement(code: str) -> Optional[ast.stmt]:
    """The first statement of a quoted line, or None when it does not parse alone."""
    try:
        body = ast.parse(code.strip()).body
    except (SyntaxError, ValueError):
        return None
    return body[0] if body else None


def calls(node, attr: str) -> list:
    """Calls ``X.attr(...)`` or ``attr(...)`` inside ``node``."""
    out = []
    for n in ast.walk(node) if node is not None else ():
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Attribute) and f.attr == attr) or (isinstance(f, ast.Name) and f.id == attr):
                out.append(n)
    return out


def assignable(node) -> bool:
    """Whether ``node`` may stand left of ``=``: a name, an attribute or a subscript."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript))


def last_event(ev, kind: str, ops, before_seq: Optional[int] = None) -> Optional[dict]:
    """The last recorded event of ``kind`` whose op is in ``ops``."""
    found = None
    for e in (ev.doc or {}).get("events") or []:
        if e.get("kind") == kind and e.get("op") in ops:
            if before_seq is not None and e.get("seq", 0) > before_seq:
                break
            found = e
    return found


def user_files(ev) -> list:
    """The program's own files seen in the run (the raising file first), as the report names them."""
    out, seen = [], set()
    file, _, _ = site(ev)
    for f in [file] + [e.get("file") for e in (ev.doc or {}).get("events") or []]:
        key = os.path.realpath(f) if f else None  # the failure names absolute paths, events display paths
        if f and key not in seen:
            seen.add(key)
            out.append(f)
    return out


class Opening(NamedTuple):
    """What every one-line explainer starts from: where the failure was raised and the line's code."""

    file: Optional[str]
    line: int
    failure: dict
    code: str


def opening(ev) -> Optional[Opening]:
    """The shared preamble of the kinds' explainers: ``(file, line, failure, code)``, or None without a line.

    Example::

        at = opening(ev)
        if at is None:
            return None  # no line to name: the generic diagnosis is used
        file, line, f, code = at
    """
    file, line, f = site(ev)
    if not line:
        return None
    return Opening(file, line, f, source.code(file, line))
