"""A deterministic sample of a corpus for the default suite; the whole corpus on request.

Each corpus program costs at least one tensorscope process (~2-3 s of CPU: torch's import, the
instrumented run, the report). The default suite runs a fixed sample of each corpus so that it stays
within its time on a 2-core machine; ``TENSORSCOPE_CORPUS_FULL=1`` runs every program (and the scorers in
each corpus folder print the full tables).

The sample is chosen by a hash of each program's name, not by position: adding a program does not
reshuffle the others, and no program is favoured for being easy. Groups given in ``groups`` (for
example the fine twins, where "no false alarm" is the must-hold) each keep their own share.
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

FULL = os.environ.get("TENSORSCOPE_CORPUS_FULL", "") not in ("", "0")


def _by_hash(items: Iterable[T], name: Callable[[T], str]) -> list[T]:
    return sorted(items, key=lambda x: hashlib.sha256(name(x).encode()).hexdigest())


def ci_sample(items: Sequence[T], keep: int, *, name: Callable[[T], str] = lambda p: p.name,
              group: Callable[[T], object] | None = None) -> list[T]:
    """``keep`` of ``items`` (all of them under TENSORSCOPE_CORPUS_FULL=1), in their original order.

    With ``group``, each group keeps a share proportional to its size (at least one member), so a
    corpus of programs and their fine twins samples both sides.
    """
    items = list(items)
    if FULL or len(items) <= keep:
        return items
    if group is None:
        chosen = _by_hash(items, name)[:keep]
    else:
        groups: dict[object, list[T]] = {}
        for x in items:
            groups.setdefault(group(x), []).append(x)
        chosen = []
        for members in groups.values():
            share = max(1, round(keep * len(members) / len(items)))
            chosen += _by_hash(members, name)[:share]
    names = {name(x) for x in chosen}
    return [x for x in items if name(x) in names]
