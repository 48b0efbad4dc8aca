"""Parameters, buffers and optimizer state grouped per module, for the summary report.

``model.blocks.3.attn.qkv.weight`` is grouped under ``model.blocks.3.attn``; modules that differ only
by an index and read the same fold into one row (``model.blocks.[0-3].attn``); a model bound to two
names, or a tied weight, is shown once with both names.
"""

from __future__ import annotations

import re

from rich.text import Text

MAX_MODULE_ROWS = 40
_INDEX = re.compile(r"^\d+$")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word if n == 1 else word + 's'}"


def _line(text: str, style: str) -> Text:
    return Text(text, style=style, no_wrap=True, overflow="ellipsis", end="\n")


def module_key(name: str) -> tuple[str, ...]:
    """The module a parameter is grouped under: its module, or the child right after an index
    (``model.blocks.3.attn.qkv.weight`` -> ``model.blocks.3.attn``)."""
    parts = name.split(".")[:-1] or [name]
    for i, p in enumerate(parts):
        if _INDEX.match(p) and len(parts) > i + 2:
            return tuple(parts[:i + 2])
    return tuple(parts)


def _ranges(nums, max_pieces: int = 4) -> str:
    """Indices in runs: ``0-3``, ``0,2,..,3998`` (a constant step), at most ``max_pieces`` runs."""
    nums = sorted(set(nums))
    pieces, i = [], 0
    while i < len(nums):
        j = i + 1
        step = nums[j] - nums[i] if j < len(nums) else 1
        while j + 1 < len(nums) and nums[j + 1] - nums[j] == step:
            j += 1
        if j >= len(nums) or j - i < 2:  # a lone index, or two that start no run
            pieces.append(str(nums[i]))
            i += 1
            continue
        a, b = nums[i], nums[j]
        pieces.append(f"{a}-{b}" if step == 1 else f"{a},{a + step},..,{b}")
        i = j + 1
    if len(pieces) > max_pieces:
        return ",".join(pieces[:max_pieces]) + f",.. ({len(nums):,} in all)"
    return ",".join(pieces)


def _fold_label(keys) -> str:
    """``model.blocks.[0-3].attn`` for the keys model.blocks.0.attn ... model.blocks.3.attn."""
    first = keys[0]
    parts = []
    for i, p in enumerate(first):
        values = {k[i] for k in keys}
        if len(values) == 1:
            parts.append(p)
        else:
            parts.append(f"[{_ranges(int(v) for v in values)}]")
    return ".".join(parts)


def _span(values, word) -> str:
    vs = sorted({v for v in values if v is not None})
    if not vs:
        return ""
    return f"{word} {vs[0]}" if len(vs) == 1 else f"{word}s {vs[0]}-{vs[-1]}"


def _describe_group(members, in_optimizer, with_state) -> str:
    params = [t for t in members if t.get("role") == "parameter"]
    buffers = [t for t in members if t.get("role") == "buffer"]
    parts = []
    if params:
        facts = []
        if all(t.get("requires_grad") and t.get("is_leaf") for t in params):
            facts.append("leaves")
        elif not any(t.get("requires_grad") for t in params):
            facts.append("frozen")
        grads = [t.get("has_grad") for t in params if t.get("requires_grad")]
        if grads:
            k = sum(1 for g in grads if g)
            facts.append(".grad set" if k == len(grads) else ".grad None" if k == 0 else f".grad set on {k:,} of {len(grads):,}")
        facts.append(_span([t.get("version") for t in params], "version"))
        odd = sorted({f"{t.get('dtype')} {t.get('device')}" for t in params} - {"float32 cpu"})
        facts += odd
        owners = sorted({o for t in params for o in in_optimizer.get(t["id"], ())})
        for o in owners:
            k = sum(1 for t in params if (o, t["id"]) in with_state)
            facts.append(f"in {o}, " + ("with state" if k == len(params) else "no state yet" if k == 0
                                         else f"state for {k}"))
        parts.append(f"{_plural(len(params), 'parameter')} ({', '.join(f for f in facts if f)})")
    if buffers:
        parts.append(f"{_plural(len(buffers), 'buffer')} ({_span([t.get('version') for t in buffers], 'version')})")
    return ", ".join(parts)


def _same_module_roots(module_tensors) -> dict[str, str]:
    """Roots naming exactly the same tensors as an earlier root (``raw_model`` is ``model``)."""
    by_root: dict[str, set] = {}
    for t in module_tensors:
        for n in t["names"]:
            by_root.setdefault(n.split(".", 1)[0], set()).add(t["id"])
    same, seen = {}, {}
    for root, ids in by_root.items():
        key = frozenset(ids)
        if key in seen:
            same[root] = seen[key]
        else:
            seen[key] = root
    return same


def modules(doc) -> list[Text]:
    module_tensors = [t for t in doc["tensors"] if t.get("role") in ("parameter", "buffer")]
    optimizers = doc.get("optimizers") or []
    if not module_tensors and not optimizers:
        return []
    in_optimizer: dict[str, list] = {}
    for o in optimizers:
        for tid in o["parameters"]:
            in_optimizer.setdefault(tid, []).append(o["name"])
    # (optimizer, parameter id) pairs that have state: state tensors are named opt.state[PARAMETER].KEY
    tid_of = {n: t["id"] for t in module_tensors for n in t["names"]}
    tid_of.update((n, t["id"]) for t in doc["tensors"] if t.get("role") == "parameter" for n in t["names"])
    with_state = set()
    for t in doc["tensors"]:
        if t.get("role") == "optimizer_state":
            for n in t["names"]:
                oname, sep, rest = n.partition(".state[")
                if sep and "]." in rest:
                    pid = tid_of.get(rest.rsplit("].", 1)[0])
                    if pid:
                        with_state.add((oname, pid))
    same = _same_module_roots(module_tensors)
    out = [Text("Parameters and buffers per module", style="bold", end="\n")]
    for root, first in same.items():
        out.append(_line(f"{root} is {first}: the same tensors under both names (shown once, as {first})",
                         style="dim"))
    groups: dict[tuple, list] = {}
    also: dict[tuple, list] = {}
    for t in module_tensors:
        names = [n for n in t["names"] if n.split(".", 1)[0] not in same]
        if not names:
            names = t["names"]
        key = module_key(names[0])
        groups.setdefault(key, []).append(t)
        for n in names[1:]:
            if n.split(".", 1)[0] not in same and "[" not in n:
                also.setdefault(key, []).append((names[0], n))
    # fold groups that differ only by an index and read the same
    rows: dict[tuple, list] = {}
    for key, members in groups.items():
        pattern = tuple("#" if _INDEX.match(p) else p for p in key)
        desc = _describe_group(members, in_optimizer, with_state)
        rows.setdefault((pattern, desc), []).append(key)
    shown = 0
    for (pattern, desc), keys in rows.items():
        if shown >= MAX_MODULE_ROWS:
            break
        shown += 1
        label = ".".join(keys[0]) if len(keys) == 1 else _fold_label(keys)
        row = Text(end="\n")
        row.append(label, style="bold")
        row.append(f" ({len(keys):,} modules, each)" if len(keys) > 1 else "")
        row.append(f": {desc}")
        for key in keys[:1]:
            for a, b in also.get(key, [])[:2]:
                row.append(f"; {b} is {a}", style="cyan")
        out.append(row)
    if len(rows) > MAX_MODULE_ROWS:
        out.append(_line(f"... {len(rows) - MAX_MODULE_ROWS} more module rows (--full)", style="dim"))
    for o in optimizers:
        state = [t for t in doc["tensors"] if t.get("role") == "optimizer_state" and
                 any(n.startswith(o["name"] + ".state[") for n in t["names"])]
        with_state = len({n.split("].", 1)[0] for t in state for n in t["names"] if n.startswith(o["name"] + ".state[")})
        row = Text(end="\n")
        row.append(f"{o['name']}", style="bold")
        row.append(f" ({o['type']}): {_plural(len(o['parameters']), 'parameter')}, state for {with_state:,} of them")
        if o.get("state_keys"):
            row.append(f": {', '.join(o['state_keys'])} ({len(state):,} tensors")
            example = next((n for t in state for n in t["names"] if n.startswith(o["name"] + ".state[")), None)
            row.append(f", e.g. {example})" if example else ")")
        out.append(row)
    return out
