"""Recognise a pasted PyTorch error text or traceback and decode its facts.

This module is the generic machinery: cleaning the text, trying every kind's
message patterns (each kind module in :mod:`tensorscope.kinds` declares its
own ``PATTERNS`` and ``advise``), the exception type, the traceback frames and
the anomaly-mode block.

The text is only matched against regular expressions, never executed or
evaluated, and this module imports nothing from torch. Every pattern is
anchored on a literal phrase and uses bounded repetition, so matching stays
linear in the size of the text; only the last :data:`MAX_SCAN` characters
are looked at.

Example::

    >>> p = parse("RuntimeError: element 0 of tensors does not require grad "
    ...           "and does not have a grad_fn")
    >>> p.kind, p.exception_type, p.fields["index"]
    ('no-grad-fn', 'RuntimeError', 0)
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from tensorscope.kinds import ADVICE, KINDS, PATTERNS
from tensorscope.kinds._base import w as _w
from tensorscope.kinds._message import NAME as _NAME
from tensorscope.kinds._message import node_facts as _node_facts

#: Only the last this-many characters of a text are scanned.
MAX_SCAN = 2_000_000
_LINE_CAP = 8192  # longer lines are never traceback frames
_TRIES = 16  # matches per pattern decoded, from the last one back


@dataclass
class ParsedMessage:
    """A recognised failure: its kind, the message itself and the decoded facts."""

    kind: str
    exception_type: Optional[str]
    message: str
    fields: dict = field(default_factory=dict)
    frames: list = field(default_factory=list)


# --------------------------------------------------------------------------
# The patterns of every kind, compiled once, in the registry's order (ties go to the first).


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern
    decode: Callable[[re.Match], Optional[dict]]


_PATTERNS = tuple(_Pattern(code, re.compile(p.regex), p.decode) for code, p in PATTERNS)


# --------------------------------------------------------------------------
# Tracebacks: the exception type, the frames and the anomaly-mode block.

_RANK_PREFIX = re.compile(r"(?m)^\[(?:rank|default)\d{1,6}\]:[ ]?")  # torchrun's per-line prefix
_ANSI = re.compile(r"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]|\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)|[@-Z\\-_])")
_EXC_TYPE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]{0,150}?(?:Error|Exception|Warning|Interrupt|Exit)):\s")
_ONLY_EXC_TYPE = re.compile(r"\s*([A-Za-z_][\w.]{0,150}?(?:Error|Exception|Warning)):\s*")
# Frame lines are matched whole (fullmatch) and are at most _LINE_CAP long; a lazy
# prefix is always followed by a tail that either fails at once or runs to the end.
_IN_FUNC = r"(?:, in (?P<func>[^\n]*))?"
_PY_FRAME = re.compile(r'\s*File "(?P<file>[^"\n]{1,4096})", line (?P<line>\d{1,9})' + _IN_FUNC + r"\s*")
_IPY_CELL = re.compile(r"\s*(?P<file>Cell In\s?\[\s?\d{1,9}\]), line (?P<line>\d{1,9})" + _IN_FUNC + r"\s*")
_IPY_FILE = re.compile(r"\s*File (?P<file>[^\n]{1,4096}?):(?P<line>\d{1,9}), in (?P<func>[^\n]*)")
_IPY_INPUT = re.compile(r"\s*(?P<file>Input In \[\s?\d{1,9}\]), in (?P<func>[^\n]*)")
_IPY_OLD = re.compile(r"(?P<file>\S[^\n]{0,4096}?) in (?P<func>[\w<>.]{1,200})(?:\([^\n]*)?")
_ARROW = re.compile(r"\s*-{1,20}>\s{0,8}(?P<line>\d{1,9})(?: (?P<code>[^\n]{0,4096}))?")
_CONTEXT = re.compile(r"\s*(?:-{1,20}>\s{0,8})?\d{1,9}(?: |$)")
_CARETS = re.compile(r"\s*[~^]{1,4096}\s*")
_TORCH_INTERNAL = re.compile(
    r"(?:^|/)(?:site|dist)-packages/(?:torch|functorch)/"
    r"|(?:^|/)torch/(?:_tensor\.py|autograd/|_ops\.py|overrides\.py|cuda/__init__\.py|nn/modules/module\.py)"
)
_ANOMALY = re.compile(r"Error\s+detected\s+in\s+(?P<node>" + _NAME + r")\.\s+"
                      + _w("Traceback of forward call that caused the error:"))
_INDUCED = re.compile(_w("Previous calculation was induced by") + r"\s+(?P<node>" + _NAME + r")\.")


def _frame(file: Optional[str], line: Optional[str], func: Optional[str]) -> dict:
    """Return one frame dict: file, line, function (without IPython's argument list), code."""
    if func is not None:
        func = func.strip()
        if "(" in func and not func.startswith("<"):
            func = func[: func.index("(")]  # IPython prints `in Tensor.backward(self, ...)`
    return {"file": file.strip() if file else file, "line": int(line) if line else None,
            "function": func, "code": None}


def _frames(lines: list, stop_at_other: bool = False) -> list:
    """Parse traceback frames (Python, IPython old and new) from ``lines``.

    With ``stop_at_other`` parsing ends at the first line that is neither a frame
    header nor its source line (the end of an anomaly-mode forward traceback).
    """
    frames: list = []
    pending: Optional[dict] = None  # a frame whose source line may follow
    for i, line in enumerate(lines):
        if len(line) > _LINE_CAP:
            pending = None
            continue
        m = _PY_FRAME.fullmatch(line)
        if m:
            pending = _frame(m["file"], m["line"], m["func"] or "<module>")
            pending["_py"] = len(line) - len(line.lstrip())  # its source line is indented deeper
            frames.append(pending)
            continue
        m = _IPY_CELL.fullmatch(line) or _IPY_INPUT.fullmatch(line) or _IPY_FILE.fullmatch(line)
        if m is None and not line[:1].isspace() and i + 1 < len(lines) and _CONTEXT.match(lines[i + 1]):
            m = _IPY_OLD.fullmatch(line)
        if m:
            gd = m.groupdict()
            pending = _frame(m["file"], gd.get("line"), gd.get("func") or "<module>")
            frames.append(pending)
            continue
        m = _ARROW.fullmatch(line)
        if m:
            if pending is None or "_py" in pending or pending["code"] is not None:
                pending = _frame(None, None, None)
                frames.append(pending)
            pending["line"], pending["code"] = int(m["line"]), (m["code"] or "").strip() or None
            continue
        if pending is not None and "_py" in pending and pending["code"] is None and line.strip() \
                and len(line) - len(line.lstrip()) > pending["_py"] and not _CARETS.fullmatch(line):
            pending["code"] = line.strip()
            continue
        if stop_at_other and not _CARETS.fullmatch(line) and not _CONTEXT.match(line):
            break
    for frame in frames:
        frame.pop("_py", None)
    return [f for f in frames if not (f["file"] and _TORCH_INTERNAL.search(f["file"].replace("\\", "/")))]


def _exception_type(text: str, start: int) -> tuple[Optional[str], int]:
    """Return the exception type printed before ``start`` and where its message begins."""
    lo = max(0, start - 400)
    nl = text.rfind("\n", lo, start)
    line_start = nl + 1 if nl >= 0 else lo
    found = None
    for found in _EXC_TYPE.finditer(text, line_start, start):
        pass
    if found is not None:
        return found[1], found.end()
    if nl >= 0 and not text[line_start:start].strip():  # "RuntimeError:" alone on the line above
        prev = text.rfind("\n", max(0, nl - 200), nl)
        m = _ONLY_EXC_TYPE.fullmatch(text, prev + 1 if prev >= 0 else max(0, nl - 200), nl)
        if m:
            return m[1], start
    return None, start


def _anomaly(text: str, before: int) -> dict:
    """Decode the anomaly-mode block nearest before ``before`` (else the last one)."""
    found = None
    for m in _ANOMALY.finditer(text):
        if found is not None and m.start() > before:
            break
        found = m
    if found is None:
        return {}
    block = text[found.end(): found.end() + 200_000].split("\n")[1:2000]
    out = {"anomaly_node": found["node"], "forward_frames": _frames(block, stop_at_other=True)}
    induced = [m["node"] for m in _INDUCED.finditer(text, found.end(), max(before, found.end()))]
    if induced:
        out["anomaly_induced_by"] = induced
    return out


def _traceback_frames(text: str, line_start: int) -> list:
    """Frames of the traceback that ends at the message line starting at ``line_start``."""
    header = text.rfind("Traceback (most recent call last)", 0, line_start)
    if header >= 0:
        region = text[text.find("\n", header, line_start) + 1: line_start]
        lines = region.split("\n")
    else:  # no header pasted: look at the lines just above the message
        lines = text[max(0, line_start - 20_000): line_start].split("\n")[-60:]
    return _frames(lines)


# --------------------------------------------------------------------------
# The entry points.


def _clean(text) -> str:
    """Return the scanned tail of ``text`` without ANSI codes, CR line ends or torchrun prefixes."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text[-4 * MAX_SCAN:]).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        return ""
    text = text[-MAX_SCAN:]
    text = _ANSI.sub("", text).replace("\x1b", "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _RANK_PREFIX.sub("", text) if "]:" in text else text


def _best_match(text: str):
    """Return ``(pattern, match, fields)`` for the last known message in ``text``."""
    best = None
    for pattern in _PATTERNS:
        last = deque(pattern.regex.finditer(text), maxlen=_TRIES)
        while last:
            m = last.pop()
            if best is not None and m.start() <= best[1].start():
                break
            fields = pattern.decode(m)
            if fields is not None:
                best = (pattern, m, fields)
                break
    return best


def parse(text: str) -> Optional[ParsedMessage]:
    """Recognise the last failure tensorscope knows in ``text``; ``None`` if there is none.

    ``text`` may be a bare message, a Python or IPython traceback, with ANSI
    colours, Windows line endings, prompts or log noise around it, and the
    anomaly-mode warning block. In a chained traceback the last exception wins;
    when that one is not known (a wrapper such as ``ValueError(...) from e``),
    the last known one before it is taken. Nothing in the text is ever executed.
    """
    text = _clean(text)
    best = _best_match(text)
    if best is None:
        return None
    pattern, m, fields = best
    exception_type, start = _exception_type(text, m.start())
    message = re.sub(r"\s*\n\s*", " ", text[start: m.end()]).strip()
    nl = text.rfind("\n", 0, m.start())
    line_start = nl + 1
    fields = dict(fields)
    anomaly = _anomaly(text, line_start)
    if anomaly:
        fields.update(anomaly)
        if pattern.kind == "inplace-modified-saved-tensor":
            _confirm_node(fields)
    return ParsedMessage(pattern.kind, exception_type, message, fields, _traceback_frames(text, line_start))


def _confirm_node(fields: dict) -> None:
    """Use the anomaly-mode node, the one that saved the tensor, to pin a guessed node name."""
    fields["anomaly_enabled"] = True
    fields["saved_by"] = fields["anomaly_node"]
    facts = _node_facts(fields["anomaly_node"])
    if fields.get("node_guessed") and facts["op"] == fields.get("op") and not facts["node_guessed"]:
        fields["node"], fields["node_guessed"] = facts["node"], False


def describe(parsed: ParsedMessage) -> dict:
    """Return the explanation of ``parsed``: its Kind's text with fixes made concrete.

    The result has ``kind``, ``title``, ``explanation``, ``causes``, ``fixes``
    (concrete ones first), ``evidence`` (sentences stating the decoded facts)
    and ``fields``.
    """
    kind = KINDS[parsed.kind]
    f = parsed.fields
    advise = ADVICE.get(parsed.kind)
    title, evidence, concrete = advise(f) if advise else (None, [], [])
    fixes = list(concrete) + [fix for fix in kind.fixes if fix not in concrete]
    return {"kind": kind.code, "title": title or kind.title, "explanation": kind.explanation,
            "causes": list(kind.causes), "fixes": fixes, "evidence": evidence, "fields": dict(f)}
