"""What a kind module holds, and the small torch-free helpers the kind modules share.

A kind module (``tensorscope/kinds/<code with underscores>.py``) defines ``KIND`` (a
:class:`Kind`), and optionally ``PATTERNS`` (message regexes with their decoders),
``advise(fields)`` (concrete wording from decoded message fields), ``explain(ev)``
(a diagnosis from the report's evidence) and ``recognise(ev)`` (whether the
evidence shows this kind when no message pattern names it). ``opening(ev)`` is the preamble the
explainers share; the message wording several kinds decode (tensor type names, node names, devices)
is in ``_message.py``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional


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
    import os

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
    from tensorscope.analysis import source

    file, line, f = site(ev)
    if not line:
        return None
    return Opening(file, line, f, source.code(file, line))
