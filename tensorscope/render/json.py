"""The JSON form: exactly one document, stable keys (schema_version 1).

NOTE [Fast JSON writer]
``json.dump(doc, indent=2)`` runs the standard library's pure-Python encoder (its C encoder
only serves ``indent=None``): for the report of a model with thousands of parameters that is
a quarter of a second, more than the rest of the report together. ``write`` produces the very
same bytes (same layout, escapes, float and key forms, ``default=str``) with one recursive
function that appends to a list, and writes the document in pieces, one top-level entry at a
time, so that no whole-document string is held in memory. tests/test_json_writer.py checks it
byte for byte against ``json.dumps``.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string

_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")
_CHUNK = 4096  # pieces gathered before a write (a few hundred KB)


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, default=str) + "\n"


def write(doc: dict, fp) -> None:
    """The same document as ``render``, streamed to a file (see NOTE [Fast JSON writer])."""
    out: list = []
    _value(doc, "\n", out, fp)
    out.append("\n")
    fp.write("".join(out))


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return _float_repr(o)


def _key(k) -> str | None:
    """A dict key as json.dumps writes it; None: skipped (never, with the default skipkeys=False)."""
    if isinstance(k, str):
        return _string(k)
    if isinstance(k, float):
        return _string(_float(k))
    if k is True:
        return '"true"'
    if k is False:
        return '"false"'
    if k is None:
        return '"null"'
    if isinstance(k, int):
        return _string(_int_repr(k))
    raise TypeError(f"keys must be str, int, float, bool or None, not {k.__class__.__name__}")


def _scalar(o) -> str | None:
    """The encoding of a str, number, bool or None; None for a container or another object."""
    t = type(o)
    if t is str:
        return _string(o)
    if t is int:
        return _int_repr(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    if t is float:
        return _float(o)
    if isinstance(o, (list, tuple, dict)):
        return None
    if isinstance(o, str):
        return _string(o)
    if isinstance(o, int):
        return _int_repr(o)
    if isinstance(o, float):
        return _float(o)
    return _string(str(o))  # default=str


def _value(o, nl: str, out: list, fp=None) -> None:
    """Append the encoding of ``o`` whose closing bracket goes after ``nl`` (newline + indent)."""
    t = type(o)
    if t is dict or (t is not list and t is not tuple and isinstance(o, dict)):
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        append = out.append
        for k, v in o.items():
            key = _string(k) if type(k) is str else _key(k)
            tv = type(v)
            if tv is str:
                append(sep + key + ": " + _string(v))
            elif tv is int:
                append(sep + key + ": " + _int_repr(v))
            elif v is None:
                append(sep + key + ": null")
            else:
                text = _scalar(v)
                if text is not None:
                    append(sep + key + ": " + text)
                else:
                    append(sep + key + ": ")
                    _value(v, inner, out, fp)
            sep = "," + inner
        append(nl + "}")
    elif t is list or t is tuple or isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        append = out.append
        for v in o:
            tv = type(v)
            if tv is str:
                append(sep + _string(v))
            elif tv is int:
                append(sep + _int_repr(v))
            else:
                text = _scalar(v)
                if text is not None:
                    append(sep + text)
                else:
                    append(sep)
                    _value(v, inner, out)
                    if fp is not None and len(out) > _CHUNK:
                        fp.write("".join(out))
                        out.clear()
            sep = "," + inner
        append(nl + "]")
    else:
        out.append(_scalar(o))
