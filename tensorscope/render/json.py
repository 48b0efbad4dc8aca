"""The JSON form: exactly one document, stable keys (schema_version 4), compact unless ``full``
(NOTE [The compact form] in tensorscope/compact.py).

NOTE [JSON layout: one record per line]
The document is written as the standard library writes it with ``indent=2``, except that each
element of a top-level array (a tensor, a storage, a version counter, an event, a note...) is
written whole on one line:

    {
      "schema_version": 4,
      "tensors": [
        {"id": "t1", "names": ["x"], "alive": true, "shape": [3], ...},
        {"id": "t2", ...}
      ],
      "diagnosis": {
        "kind": "inplace-modified-saved-tensor",
        ...

Why: the report of a model with thousands of parameters has thousands of such records. Written
with ``indent=2`` they take ~25 lines each (200,000 lines for 8,000 tensors), and ``indent=2``
runs the standard library's pure-Python encoder (its C encoder only serves ``indent=None``):
a quarter of a second, more than the rest of the report together. One record per line lets the
C encoder write each record (about 8x faster) and gives ``grep``/``head`` a line per fact. Every
other value keeps the ``indent=2`` layout. The values are what ``json.dumps(doc, default=str)``
writes (same escapes, float forms, key forms); tests/test_json_writer.py checks the layout and
that ``json.loads`` gives the document back.
"""

from __future__ import annotations

import io
import json
from itertools import islice

from tensorscope.compact import compact, expand

_KEY = json.JSONEncoder(default=str).encode  # a key of the top-level dict, as json.dumps writes it


def _record_encoder():
    """One value on one line, as ``json.dumps(value, default=str)`` writes it.

    The standard library's C encoder, made once: ``JSONEncoder.encode`` makes a new one at every
    call, which cost more than the encoding itself for records this small. No circular check
    (``markers=None``): a report is a tree.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(default=str).encode
    encode = make(None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)

    def record(value) -> str:
        return "".join(encode(value, 0))

    return record


_record = _record_encoder()
_CHUNK = 2048  # records gathered before a write (a few hundred KB)


def render(doc, *, full: bool = False) -> str:
    out = io.StringIO()
    write(doc, out, full=full)
    return out.getvalue()


def write(doc, fp, *, full: bool = False) -> None:
    """Write ``doc`` (see NOTE [JSON layout: one record per line]), streamed: no whole-document
    string is held in memory. A report is written in its compact form unless ``full``, whichever form
    ``doc`` is in."""
    if type(doc) is not dict and not isinstance(doc, dict) or not doc:
        fp.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    doc = expand(doc) if full else compact(doc)
    sep = "{\n  "
    for k, v in doc.items():
        key = _key(k)
        if isinstance(v, (list, tuple)) and v:
            fp.write(sep + key + ": [\n    ")
            out: list = []
            first = True
            for item in v:
                if not first:
                    out.append(",\n    ")
                first = False
                out.append(_record(item))
                if len(out) > _CHUNK:
                    fp.write("".join(out))
                    out.clear()
            out.append("\n  ]")
            fp.write("".join(out))
        else:  # streamed too: the end-of-run ``memory`` object is a MB of text (5,000 paths)
            fp.write(sep + key + ": ")
            _write_indented(v, fp)
        sep = ",\n  "
    fp.write("\n}\n")


_INDENTED = json.JSONEncoder(indent=2, default=str)


def _write_indented(value, fp) -> None:
    """``json.dumps(value, indent=2, default=str)`` one level in (each new line indented by two more spaces),
    written as it is encoded: a chunk holds whole lines' pieces and "\n" is one character, so indenting each
    batch of chunks writes what indenting the whole string wrote, without holding the encoder's list of
    pieces, their joined string and its indented copy at once."""
    pieces = _INDENTED.iterencode(value)
    while True:
        batch = list(islice(pieces, 8 * _CHUNK))  # gathered in C, not a Python step a piece
        if not batch:
            return
        fp.write("".join(batch).replace("\n", "\n  "))


def _key(k) -> str:
    """A dict key as json.dumps writes it (a number, bool or None becomes its string form)."""
    return _KEY({k: 0})[1:-4]
