"""The JSON form: exactly one document, stable keys (schema_version 1)."""

from __future__ import annotations

import json


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, default=str) + "\n"
