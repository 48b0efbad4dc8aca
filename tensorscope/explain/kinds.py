"""The failure kinds now live in :mod:`tensorscope.kinds` (one module per kind); this name stays for imports."""

from __future__ import annotations

from tensorscope.kinds import KINDS, Kind, get

__all__ = ["KINDS", "Kind", "get"]
