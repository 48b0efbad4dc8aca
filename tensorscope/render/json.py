"""The JSON form: exactly one document, stable keys (schema_version 1)."""

from __future__ import annotations

import json


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, default=str) + "\n"


def write(doc: dict, fp) -> None:
    """The same document, streamed to a file: no whole-document string in memory (a report of
    thousands of tensors would otherwise cost more memory than the program it describes)."""
    json.dump(doc, fp, indent=2, default=str)
    fp.write("\n")
