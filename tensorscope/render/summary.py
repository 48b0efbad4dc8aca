"""The default terminal report: a verdict and the facts that matter, folded to fit a screen.

Everything here reads the report document only (the JSON keeps every fact; folding is a
rendering matter) and stays linear in the number of tensors and events. Every string that
comes from the program (source lines, names, messages) goes into ``rich.text.Text`` as plain
text, never as markup.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from rich.console import Group
from rich.style import Style
from rich.text import Text

_BAR = 16
MAX_STORAGE_BLOCKS = 8
MAX_BLOCK_ROWS = 6
MAX_MODULE_ROWS = 40
MAX_OTHER_NAMED = 12
MAX_TIMELINE_ROWS = 40
_INDEX = re.compile(r"^\d+$")


def line(*parts, style: str | None = None, crop: bool = True) -> Text:
    """One report line from (text, style) pairs or plain strings; cropped with an ellipsis."""
    t = Text(style=style or "", no_wrap=crop, overflow="ellipsis" if crop else "fold", end="\n")
    for p in parts:
        if isinstance(p, tuple):
            t.append(p[0], style=p[1])
        else:
            t.append(p)
    return t


# --- counting ----------------------------------------------------------------------------

def site_counts(doc) -> dict:
    """(file, line, kind) -> how many events happened there (recorded in detail or only counted)."""
    counts: Counter = Counter()
    for e in doc["events"]:
        counts[(e.get("file"), e.get("line"), e["kind"])] += 1
    for s in doc["events_summary"].get("sites") or []:
        key = (s.get("file"), s.get("line"), s["kind"])
        counts[key] = max(counts[key], s["count"])
    return counts


def backward_calls(doc, counts=None) -> tuple[int, int]:
    """(backward calls, failed ones)."""
    counts = counts or site_counts(doc)
    n = sum(c for (f, ln, k), c in counts.items() if k == "backward")
    failed = sum(1 for e in doc["events"] if e["kind"] == "backward" and e.get("ok") is False)
    d = doc.get("diagnosis")
    if d and d.get("backward") and not failed:
        failed = 1
    return n, failed


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


# --- verdict and headline ------------------------------------------------------------------

def verdict(doc, counts=None) -> Text:
    """One line: clean, the diagnosis, or the hazards."""
    n, failed = backward_calls(doc, counts)
    hazards = doc.get("hazards") or []
    d = doc.get("diagnosis")
    exc = doc["program"].get("exception")
    t = Text(end="\n")
    if d:
        t.append("failed: ", style="bold red")
        t.append(d["kind"], style="bold red")
        t.append(f"  {d.get('title') or ''}")
        where = d.get("culprit") or d.get("backward")
        if where and where.get("line"):
            t.append(f"  ({where.get('file') or ''}:{where['line']})", style="dim")
    elif hazards:
        t.append(f"{_plural(len(hazards), 'hazard')}: ", style="bold yellow")
        t.append(", ".join(sorted({h['kind'] for h in hazards})))
        t.append(f"  ({_plural(n, 'backward call')}, none failed)", style="dim")
    elif exc:
        t.append(f"the program ended with {exc['type']}", style="bold yellow")
        t.append(f"; {_plural(n, 'backward call')}, hazards: none")
    else:
        t.append("clean", style="bold green")
        if n:
            t.append(f": {_plural(n, 'backward call')}, all succeeded; hazards: none")
        else:
            t.append(": no backward call; hazards: none")
    return t


def headline(doc, counts) -> Text:
    tensors = doc["tensors"]
    alive = [t for t in tensors if t["alive"]]
    roles = Counter(t.get("role") for t in tensors)
    shared = sum(1 for s in doc["storages"] if len(s["tensors"]) > 1)
    views = sum(1 for t in alive if t.get("view_of"))
    n, _ = backward_calls(doc, counts)
    parts = [f"{_plural(len(tensors), 'tensor')} ({len(alive):,} alive)"]
    if roles.get("parameter"):
        parts.append(_plural(roles["parameter"], "parameter"))
    if roles.get("buffer"):
        parts.append(_plural(roles["buffer"], "buffer"))
    if roles.get("optimizer_state"):
        parts.append(f"{roles['optimizer_state']:,} optimizer state")
    parts += [_plural(shared, "storage") + " shared", _plural(views, "view"), _plural(n, "backward call")]
    return Text(" · ".join(parts), style="dim", end="\n")


def header(doc) -> list[Text]:
    p = doc["program"]
    out = [line((f"tensorscope {doc['command']} ", "bold"), p["path"], f"  exit status {p['exit_status']}",
                (f"  torch {doc.get('torch_version')}", "dim"))]
    if doc.get("device_mode") and doc["device_mode"] != "auto":
        out.append(line(f"device mode: {doc['device_mode']}"))
    for note in doc.get("notes") or []:
        out.append(Text(f"note: {note}", style="yellow", end="\n"))
    return out


# --- aliasing ------------------------------------------------------------------------------

def _name(t) -> str:
    return t["names"][0] if t["names"] else t["id"]


def _bar(rng, size) -> str:
    lo = int(rng[0] * _BAR / size)
    hi = max(lo + 1, int(round(rng[1] * _BAR / size))) if rng[1] > rng[0] else lo
    return ("." * lo + "#" * (hi - lo) + "." * max(0, _BAR - hi))[:_BAR]


def aliasing(doc, by_id, same=None) -> list[Text]:
    """Storages shared by two or more live tensors (one of them named), with views and version counters.

    ``same``: roots that name the same tensors as another root (``raw_model`` as ``model``),
    left out of the names shown here as in the module rows."""
    same = same or {}

    def names_of(t):
        return [n for n in t["names"] if n.split(".", 1)[0] not in same] or t["names"]

    blocks = []
    for s in doc["storages"]:
        ts = [by_id[tid] for tid in s["tensors"] if tid in by_id]
        if len(ts) < 2 or not any(t["names"] for t in ts):
            continue
        blocks.append((s, ts))
    if not blocks:
        return []
    out = [Text("Aliasing: storages shared by live tensors", style="bold", end="\n")]
    counters = Counter(t.get("version_counter") for t in doc["tensors"] if t["alive"])
    for s, ts in blocks[:MAX_STORAGE_BLOCKS]:
        size = s.get("nbytes") or max((t.get("byte_range") or [0, 0])[1] for t in ts) or 1
        out.append(line((f"{s['id']}", "bold"), f"  {s['device']}  {size:,} bytes  ",
                        (f"{len(ts)} tensors", "yellow")))
        for t in ts[:MAX_BLOCK_ROWS]:
            rng = t.get("byte_range") or [0, 0]
            names = names_of(t)
            row = line(f"  {t['id']:>5} [{_bar(rng, size)}] ", (names[0] if names else t["id"], "bold"))
            if len(names) > 1:
                row.append(f" (= {', '.join(names[1:3])}{', ...' if len(names) > 3 else ''})")
            facts = []
            if t.get("view_of"):
                base = by_id.get(t["view_of"])
                facts.append(f"view of {(names_of(base) or [base['id']])[0] if base else t['view_of']}")
            if 0 in (t.get("stride") or []):
                facts.append("stride 0")
            facts.append(f"version {t.get('version')}")
            vc = t.get("version_counter")
            if vc and counters[vc] > 1:
                facts.append(f"counter {vc} (shared)")
            elif vc:
                facts.append(f"own counter {vc}")
            row.append("  " + ", ".join(facts), style="dim")
            out.append(row)
        if len(ts) > MAX_BLOCK_ROWS:
            out.append(line(f"  ... {len(ts) - MAX_BLOCK_ROWS} more tensors on {s['id']} (--full)", style="dim"))
    if len(blocks) > MAX_STORAGE_BLOCKS:
        out.append(line(f"... {len(blocks) - MAX_STORAGE_BLOCKS} more shared storages (--full)", style="dim"))
    return out


# --- parameters, buffers, optimizer state per module ------------------------------------------

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


def modules(doc, by_id) -> list[Text]:
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
        out.append(line(f"{root} is {first}: the same tensors under both names (shown once, as {first})",
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
        out.append(line(f"... {len(rows) - MAX_MODULE_ROWS} more module rows (--full)", style="dim"))
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


def other_named(doc) -> list[Text]:
    """Named tensors that are not parameters, buffers or optimizer state."""
    rest = [t for t in doc["tensors"] if t["names"] and not t.get("role") and t["alive"]]
    if not rest:
        return []
    out = [Text("Other named tensors", style="bold", end="\n")]
    for t in rest[:MAX_OTHER_NAMED]:
        shape = "(" + ", ".join(str(s) for s in t.get("shape") or []) + ")"
        facts = [f"{shape} {t.get('dtype')} {t.get('device')}", f"version {t.get('version')}"]
        if t.get("requires_grad"):
            facts.append("leaf" if t.get("is_leaf") else f"grad_fn {t.get('grad_fn')}")
        out.append(line(("  " + ", ".join(t["names"][:3]), "bold"), f"  {t['id']}  ", (", ".join(facts), "dim")))
    if len(rest) > MAX_OTHER_NAMED:
        out.append(line(f"  ... {len(rest) - MAX_OTHER_NAMED} more (--full)", style="dim"))
    return out


# --- timeline, folded per line ---------------------------------------------------------------

_KIND_WORDS = {"create": "created", "alias": "alias", "copy": "copy", "write": "write", "saved": "saved for backward",
               "backward": "backward", "grad_mode": "grad mode", "requires_grad": "requires_grad set", "op": "aten op"}


def _library_file(lib: str | None) -> str | None:
    return lib.split(":", 1)[0] if lib else None


def short_files(files) -> dict:
    """Each file by its base name, or by its whole path where two files share a base name."""
    files = {f for f in files if f}
    base = Counter(f.replace("\\", "/").rsplit("/", 1)[-1] for f in files)
    return {f: (b if base[b] == 1 else f) for f in files for b in [f.replace("\\", "/").rsplit("/", 1)[-1]]}


def _link_style(file: str | None) -> Style:
    """Cyan, and a link to the file where the terminal shows links (rich decides)."""
    if not file or file.startswith("<"):
        return Style(color="cyan")
    try:
        return Style(color="cyan", link=Path(os.path.abspath(file)).as_uri())
    except ValueError:
        return Style(color="cyan")


def timeline(doc, counts) -> list[Text]:
    """One row per source line: what happened there and how often, the file on every row."""
    rows: dict[tuple, dict] = {}
    for e in doc["events"]:
        key = (e.get("file"), e.get("line"))
        r = rows.get(key)
        if r is None:
            r = rows[key] = {"code": e.get("code") or "", "kinds": {}, "ops": {}, "libs": {}, "failed": False}
        k = e["kind"]
        r["kinds"][k] = r["kinds"].get(k, 0) + 1
        if e.get("op") and k in ("alias", "copy", "write", "create", "op"):
            ops = r["ops"].setdefault(k, [])
            if e["op"] not in ops:
                ops.append(e["op"])
        if k == "write" and e.get("library"):
            libs = r["libs"].setdefault(_library_file(e["library"]), 0)
            r["libs"][_library_file(e["library"])] = libs + 1
        if k == "backward" and e.get("ok") is False:
            r["failed"] = True
    for s in doc["events_summary"].get("sites") or []:
        key = (s.get("file"), s.get("line"))
        if key not in rows:
            rows[key] = {"code": s.get("code") or "", "kinds": {s["kind"]: 0}, "ops": {}, "libs": {}, "failed": False}
        rows[key]["kinds"].setdefault(s["kind"], 0)
    if not rows:
        return []
    out = [Text("Timeline, per line (--line FILE:LINE for one line, --full for every event)", style="bold",
                end="\n")]
    short = short_files(f for f, _ in rows)
    for (file, ln), r in list(rows.items())[:MAX_TIMELINE_ROWS]:
        parts = []
        for k in r["kinds"]:
            n = counts.get((file, ln, k), 0)
            word = _KIND_WORDS.get(k, k)
            if k == "write" and r["libs"]:
                where = ", ".join(r["libs"])
                mixed = sum(r["libs"].values()) < r["kinds"][k]
                word = f"write ({'some ' if mixed else ''}inside {where})"
            elif r["ops"].get(k):
                word = f"{word} {'/'.join(r['ops'][k][:3])}"
            if k == "backward" and r["failed"]:
                word += " FAILED"
            parts.append(f"{word} x{n:,}" if n != 1 else word)
        name = short.get(file, file) or "?"
        where = f"{name}:{ln}" if ln else name
        out.append(line((where, _link_style(file)), "  ", "; ".join(parts), ("  " + r["code"], "dim")))
    if len(rows) > MAX_TIMELINE_ROWS:
        out.append(line(f"... {len(rows) - MAX_TIMELINE_ROWS} more lines with events (--full)", style="dim"))
    return out


def renderables(doc, panels) -> list:
    """The summary report as rich renderables; ``panels`` draws a diagnosis or hazard panel."""
    counts = site_counts(doc)
    by_id = {t["id"]: t for t in doc["tensors"] if t["alive"]}
    out: list = header(doc)
    out.append(verdict(doc, counts))
    out.append(headline(doc, counts))
    if doc.get("diagnosis"):
        out.append(panels(doc["diagnosis"], "Diagnosis"))
    for h in doc.get("hazards") or []:
        out.append(panels(h, "Hazard (nothing raised)"))
    same = _same_module_roots([t for t in doc["tensors"] if t.get("role") in ("parameter", "buffer")])
    for section in (aliasing(doc, by_id, same), modules(doc, by_id), other_named(doc), timeline(doc, counts)):
        if section:
            out.append(Text("", end="\n"))
            out.extend(section)
    return [Group(*out)]
