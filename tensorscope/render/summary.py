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

from tensorscope import holder_path
from tensorscope.render.fold import fold
from tensorscope.render.modules import _same_module_roots, modules
from tensorscope.torch_import import IMPORT_FAILED, NEVER_IMPORTED_TORCH, NOT_RECORDED
from tensorscope.units import human_bytes as _bytes

_BAR = 16
MAX_STORAGE_BLOCKS = 8
MAX_BLOCK_ROWS = 6
MAX_OTHER_NAMED = 12
MAX_TIMELINE_ROWS = 40


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
        where = d.get("culprit") or d.get("backward")
        if where and where.get("line"):
            t.append(f" at {where.get('file') or ''}:{where['line']}")
        if hazards:
            t.append(f"; {_plural(len(hazards), 'hazard')}", style="yellow")
    elif hazards:
        distinct = len(fold(hazards))
        t.append(f"{_plural(len(hazards), 'hazard')}" + (f" ({distinct} distinct)" if distinct < len(hazards) else "")
                 + ": ", style="bold yellow")
        t.append(", ".join(sorted({h['kind'] for h in hazards})))
        t.append(f"  ({_plural(n, 'backward call')}, none failed)", style="dim")
    elif exc:
        t.append(f"the program ended with {exc['type']}", style="bold yellow")
        if _unwatched(doc):
            t.append("; not recorded: torch was loaded in a way tensorscope does not watch", style="bold yellow")
        else:
            t.append(f"; {_plural(n, 'backward call')}, hazards: none")
    elif failed_children(doc):  # never "clean": see NOTE [Child processes]
        bad = failed_children(doc)
        t.append(f"{_plural(len(bad), 'child process', 'child processes')} failed", style="bold red")
        t.append(f" (pid {', '.join(str(c['pid']) for c in bad)}; not recorded); "
                 f"{_plural(n, 'backward call')} here, hazards: none")
    elif NEVER_IMPORTED_TORCH in (doc.get("notes") or ()):
        t.append("not recorded: the program never imported torch", style="bold yellow")
    elif IMPORT_FAILED in (doc.get("notes") or ()):
        t.append("not recorded: the program's import of torch failed", style="bold yellow")
    elif _unwatched(doc):  # NOTE [torch loaded without an import] in torch_import.py: never "clean"
        t.append("not recorded: torch was loaded in a way tensorscope does not watch", style="bold yellow")
    else:
        t.append("clean", style="bold green")
        if n and failed:  # a failure that did not end the program is not the diagnosis, but it did happen:
            # caught, or raised in a thread that died of it while the main thread went on
            t.append(f": {_plural(n, 'backward call')}, {failed:,} failed and the program went on "
                     "(caught, or a thread died of it); hazards: none")
        elif n:
            t.append(f": {_plural(n, 'backward call')}, all succeeded; hazards: none")
        else:
            t.append(": no backward call; hazards: none")
    return t


def failed_children(doc) -> list:
    """The program's child processes that failed (see NOTE [Child processes])."""
    return [c for c in (doc.get("program") or {}).get("children") or [] if c.get("failed")]


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


def _unwatched(doc) -> bool:
    """torch ran, but tensorscope could not watch it (NOTE [torch loaded without an import] in torch_import.py)."""
    return any(note in NOT_RECORDED for note in doc.get("notes") or ())


def header(doc) -> list[Text]:
    p = doc["program"]
    head = line((f"tensorscope {doc['command']} ", "bold"), p["path"], f"  exit status {p['exit_status']}")
    if p.get("exception"):
        e = p["exception"]
        head.append(f"  {e['type']}" + (f" at line {e['line']}" if e.get("line") else ""), style="red")
    tv = doc.get('torch_version')
    head.append(f"  torch {tv}" if tv is not None else "  torch not imported", style="dim")
    out = [head]
    if doc.get("device_mode") and doc["device_mode"] != "auto":
        out.append(line(f"device mode: {doc['device_mode']}"))
    return out


def notes(doc, *, coverage: bool = False) -> list[Text]:
    """The report's notes, one line each: below the verdict, which stays the second line. ``coverage``: only those
    that say what was not looked at, not those that say how much of the event log is detailed (a clean
    ``explain``: a training loop's lines always pass their detailed-event cap, and that limits no check)."""
    return [Text(f"note: {note}", style="yellow", end="\n") for note in doc.get("notes") or []
            if not (coverage and _LOG_DETAIL_NOTES.match(note))]


# the notes of ``Recorder.note_caps`` (instrument/recorder.py): the log's detail, not what was checked
_LOG_DETAIL_NOTES = re.compile(r"[0-9,]+ events past the first [0-9,]+ at a line |the event log is full: ")


# --- aliasing ------------------------------------------------------------------------------

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
               "backward": "backward", "grad_mode": "grad mode", "requires_grad": "requires_grad set", "op": "aten op",
               "sample": "distribution draw"}


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


def finding_panels(doc, panels) -> list:
    """The diagnosis panel, then one panel per hazard, repeated ones folded (see NOTE [Folding
    repeated hazards]); ``panels(finding, heading, group)`` draws one."""
    out = [panels(doc["diagnosis"], "Diagnosis", [doc["diagnosis"]])] if doc.get("diagnosis") else []
    return out + [panels(shown, "Hazard (nothing raised)", group) for shown, group in fold(doc.get("hazards") or [])]


def found(doc) -> bool:
    """A diagnosis or a hazard."""
    return bool(doc.get("diagnosis") or doc.get("hazards"))


# NOTE [The finding on the last screen]
# A real model's summary runs to 80-100 lines (memory held, modules, a timeline that starts with the
# weight initialisation), so in a terminal the diagnosis has scrolled away when the prompt returns.
# explain is asked for the finding: when it finds one, its default is the verdict and the panels
# with one line naming the options that show the rest (--report, --full, --tensor, --line). The
# longer forms (run's summary, explain --report, --full) end with the verdict again, clean or not
# (as pyinstrument and memray end theirs with a footer): a clean run of a real model is as long, and
# a user who sees its last screen (parameters, the timeline) must not have to scroll back to learn
# whether anything was found.
MORE = "more: --report (the summary) · --full (every event) · --tensor NAME · --line FILE:LINE"


def findings(doc, panels) -> list:
    """explain's default when it found something: the verdict and the findings, then where the rest is
    (see NOTE [The finding on the last screen])."""
    counts = site_counts(doc)
    out: list = [*header(doc), verdict(doc, counts), *notes(doc)]
    facts = bool(doc["tensors"] or doc["events"])  # a document stripped to its findings has no more
    if facts:
        out.append(headline(doc, counts))
    out.extend(finding_panels(doc, panels))
    if facts:
        out.append(Text(MORE, style="dim", end="\n"))
    return [Group(*out)]


def closing(doc) -> list:
    """The verdict again at the end of a long report, so that the last screen holds it (see NOTE
    [The finding on the last screen])."""
    return [Text("", end="\n"), verdict(doc)]


def renderables(doc, panels) -> list:
    """The summary report as rich renderables; ``panels`` draws a diagnosis or hazard panel."""
    counts = site_counts(doc)
    by_id = {t["id"]: t for t in doc["tensors"] if t["alive"]}
    out: list = header(doc)
    out.append(verdict(doc, counts))
    out.extend(notes(doc))
    if doc["tensors"] or doc["events"]:  # a document stripped to its findings has no facts to count
        out.append(headline(doc, counts))
    out.extend(finding_panels(doc, panels))
    same = _same_module_roots([t for t in doc["tensors"] if t.get("role") in ("parameter", "buffer")])
    sections = [s for s in (memory_held(doc), aliasing(doc, by_id, same), modules(doc), other_named(doc),
                            timeline(doc, counts)) if s]
    for section in sections:
        out.append(Text("", end="\n"))
        out.extend(section)
    if sections:  # the verdict is no longer on the last screen
        out.extend(closing(doc))
    return [Group(*out)]


MEMORY_ROWS = 5


def memory_held(doc) -> list:
    """"Memory held": the names holding the most bytes at the end (or at the exception), with their paths."""
    mem = doc.get("memory") or {}
    holders = [h for h in mem.get("holders") or () if h.get("bytes")][:MEMORY_ROWS]
    blocks = [b for b in mem.get("cuda_blocks") or () if isinstance(b, dict)]
    if not (holders or blocks):
        return []
    total = f"{_bytes(mem.get('total_bytes') or 0)} in {mem.get('storages', 0)} storages"
    if mem.get("cuda_allocated") is not None:
        total += f"; CUDA {_bytes(mem['cuda_allocated'])} allocated"
    out = [line(("Memory held", "bold"), f" ({total} reached from the program's names)", crop=False)]
    for h in holders:
        path = holder_path.text(h.get("path"))
        what = f"{h.get('tensors', 0)} tensor{'s' if h.get('tensors') != 1 else ''}"
        if h.get("graph_nodes"):
            what += f", {h['graph_nodes']} graph nodes"
        out.append(line(f"  {_bytes(h['bytes']):>9}  ", (h["name"], "bold"), f" ({h.get('type')}, {h.get('where')}; "
                        f"{what})", (f"  largest: {path}" if path and " -> " in path else "", "dim"), crop=False))
    out.extend(_cuda_blocks(blocks))
    return out


def _cuda_blocks(blocks: list) -> list:
    """The largest CUDA blocks of the allocator's snapshot, each named by the path that holds it."""
    if not blocks:
        return []
    shown = blocks[:MEMORY_ROWS]
    more = f", {len(blocks) - len(shown)} more in the JSON" if len(blocks) > len(shown) else ""
    out = [line(("  CUDA blocks", "bold"), f" (the {len(shown)} largest allocated{more})", crop=False)]
    for b in shown:
        name = holder_path.text(b.get("path")) if b.get("path") else (b.get("name") or "")
        where = f"cuda:{b['device']}" if b.get("device") is not None else "cuda"
        out.append(line(f"  {_bytes(b.get('bytes') or 0):>9}  ", (where, "dim"), "  ",
                        (name, "bold") if name else ("not reached from the program's names", "dim"), crop=False))
    return out
