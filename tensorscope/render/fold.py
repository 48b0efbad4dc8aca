"""Hazards found again and again folded into one finding with a count, for every output form.

# NOTE [Folding repeated hazards]
A write that goes wrong in a training loop goes wrong at every step: the recording keeps one hazard
per occurrence (one per saved tensor, per kept value), and the JSON keeps them all. A reader needs
the finding once. The renderers (terminal, HTML, SARIF, the pytest plugin) fold hazards of one kind
found at the same places -- the culprit, the saving line, the keeping line and, for retention, the
holder -- into one, shown with how many times it was found and for which tensors. A hazard without
a culprit line is never folded: without a place there is nothing to say it is the same one.
"""

from __future__ import annotations

_PLACES = ("culprit", "saved_by", "kept_at")
MAX_TENSORS = 6


def _at(place) -> tuple | None:
    return (place.get("file"), place.get("line")) if place else None


def key(hazard: dict, index: int) -> tuple:
    """What makes two hazards the same finding (see NOTE [Folding repeated hazards])."""
    if not (hazard.get("culprit") or {}).get("line"):
        return ("unfolded", index)
    holder = (hazard.get("retention") or {}).get("holder")
    return (hazard["kind"], *(_at(hazard.get(k)) for k in _PLACES), holder)


def fold(hazards: list) -> list[tuple[dict, list[dict]]]:
    """``[(shown, group)]`` in first-seen order: each group of repeated hazards and the one shown
    for it (the first whose tensor has a name, else the first)."""
    groups: dict[tuple, list] = {}
    for i, h in enumerate(hazards):
        groups.setdefault(key(h, i), []).append(h)
    return [(next((h for h in g if (h.get("tensor") or {}).get("names")), g[0]), g) for g in groups.values()]


def _tensor_label(h: dict) -> str | None:
    t = h.get("tensor") or {}
    names = t.get("names") or []
    if names and t.get("id"):
        return f"{names[0]} ({t['id']})"
    return names[0] if names else t.get("id")


def repeats(group: list) -> str | None:
    """One line saying how often a folded hazard was found, for which tensors and backward calls;
    None for a hazard found once."""
    if len(group) < 2:
        return None
    text = f"found {len(group)} times"
    tensors = list(dict.fromkeys(t for t in map(_tensor_label, group) if t))
    if tensors:
        more = f", ... ({len(tensors) - MAX_TENSORS} more)" if len(tensors) > MAX_TENSORS else ""
        text += f": tensors {', '.join(tensors[:MAX_TENSORS])}{more}"
    backs = list(dict.fromkeys(_at(h.get("backward")) for h in group if (h.get("backward") or {}).get("line")))
    if len(backs) > 1:
        text += "; backward at lines " + ", ".join(str(ln) for _, ln in backs)
    return text
