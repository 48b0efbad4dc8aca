"""Fixes that keep what a write to a parameter was for (torch-free).

# NOTE [A fix keeps the write's intent]
A write into a parameter between the forward pass and backward() -- `p.data.clamp_(-c, c)` (weight
clipping), a renormalisation, a projection -- is meant to change the parameter. Writing into a clone
would make the error or the hazard go away and silently drop the clipping; an out-of-place
`p = p.clamp(...)` rebinds a name (or, on a module attribute, raises: a Parameter cannot be replaced
by a Tensor). What keeps both the intent and correct gradients is to make the same write where no
graph holds the old values: after the optimizer step (or before the forward pass), under
`torch.no_grad()`, through the parameter itself. The evidence decides: the written memory is a
parameter's (a module's, an optimizer's, or any leaf that requires grad), and the write
is the program's own (not inside torch.optim or torch.nn). The step's line is the optimizer's first
recorded write into that parameter after this one (else any); without one, backward's line.

# NOTE [A write meant to reach its base]
The same holds beyond parameters. A write through a view (``row = h[0]; row.mul_(0.5)``) also writes
its base and every other view of that memory; when the program reads one of those later (``h.sum()``
on a later line, or anywhere in a loop around the write: see NOTE [Read after the write] in
_reads.py), the write is meant to reach it. An out-of-place op (``row = row.mul(0.5)``) or a clone of
the view before writing rebinds the view's name and drops the write into the base. What keeps it is
to leave the write alone and give the op that saved the tensor a copy of its own, at the saving line
(``z = row.clone() * w``): backward then reads the copy, the program reads the written memory.
"""

from __future__ import annotations

import ast
import linecache
import re

from tensorscope.kinds._base import Evidence
from tensorscope.kinds._reads import loads_after, roots
from tensorscope.source import code_at, statement_at, without_comment


def _held(ev: Evidence) -> set:
    return {p for o in ev.doc.get("optimizers") or [] for p in o.get("parameters") or []}


def parameter_written(ev: Evidence, tid: str | None, alias: str | None = None) -> dict | None:
    """The parameter whose storage tensor ``tid`` is on (``tid`` itself, a view, a ``.data`` alias), or
    None. A parameter: a module's or one an optimizer updates; or a leaf that requires grad written
    through its own name (``w.data.mul_(0.5)`` on `w = torch.randn(..., requires_grad=True)`; not
    ``tmp.mul_(2)`` on `tmp = y.detach()`, which is part of a computation)."""
    t = ev.by_id.get(tid) if tid else None
    if t is None or not t.get("storage"):
        return None
    held = _held(ev)
    same = [p for p in ev.doc["tensors"] if p.get("storage") == t["storage"]]
    found = next((p for p in same if p.get("role") == "parameter" or p["id"] in held), None)
    if found is not None:
        return found
    root = re.sub(r"(\.data|\.detach\(\))+$", "", alias or "")
    return next((p for p in same if p.get("is_leaf") and p.get("requires_grad") and root in p["names"]), None)


def forward_pending(ev: Evidence) -> bool:
    """Whether a forward pass saved tensors for a backward() that has not run yet (the recorded events;
    a saved tensor that is a parameter's view may be left out of the report, so any saved tensor counts)."""
    pending = False
    for e in ev.doc.get("events") or []:
        if e.get("kind") == "backward":
            pending = False
        elif e.get("kind") == "saved":
            pending = True
    return pending


def _optimizer_step(ev: Evidence, param: dict, after_seq) -> dict | None:
    """The first write inside torch.optim into the parameter's storage after ``after_seq`` (else any)."""
    steps = [e for e in ev.doc.get("events") or [] if e.get("kind") == "write"
             and "torch/optim" in (e.get("library") or "")
             and (ev.by_id.get(e.get("tensor")) or {}).get("storage") == param.get("storage")]
    return next((e for e in steps if after_seq is None or e.get("seq", 0) > after_seq), steps[0] if steps else None)


def without_data(code: str) -> str:
    """The same write through the parameter itself: `p.data.clamp_(-1, 1)` -> `p.clamp_(-1, 1)`,
    `p.detach().mul_(2)` -> `p.mul_(2)`, `p.data = p.data.clamp(-1, 1)` -> `p.copy_(p.clamp(-1, 1))`."""
    m = re.fullmatch(r"\s*([\w.\[\]]+?)\.data\s*=\s*(.+?)\s*", code or "")
    if m:
        return f"{m[1]}.copy_({without_data(m[2])})"
    return re.sub(r"(\.data\b|\.detach\(\))(?=\s*[.\[])", "", (code or "").strip())


def _line(file: str | None, line: int, other: str | None) -> str:
    """``line 16``, or ``main.py:16`` when it is in another file than ``other``."""
    if not file or file == other:
        return f"line {line}"
    return f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def move_after_step(ev: Evidence, param: dict, file: str | None, line: int | None, seq=None,
                    backward: dict | None = None) -> str:
    """The fix for the program's write at ``file:line`` into ``param`` while a graph still needs its old
    values (see NOTE [A fix keeps the write's intent]); ``backward``: the backward call's place."""
    code = code_at(file, line)
    write = without_data(code)
    name = (param.get("names") or [None])[0]
    step = _optimizer_step(ev, param, seq)
    optimizer = next((o["name"] for o in ev.doc.get("optimizers") or [] if param["id"] in (o.get("parameters") or [])
                      and o.get("name")), None)
    back = backward or {}
    if step is not None:
        after = (f"after {_line(step.get('file'), step['line'], file)} "
                 f"(`{step.get('code') or code_at(step.get('file'), step['line'])}`)")
    else:
        after = "after backward()" + (f" ({_line(back.get('file'), back['line'], file)})" if back.get("line") else "")
        after += f" and `{optimizer}.step()`" if optimizer else ""
    there = (step or back).get("file")
    # the write is in a function the program calls from another file: the call moves
    call = " (the write is inside a function: move the call that runs it)" if there and there != file else ""
    noun = "parameter" if param.get("role") == "parameter" or param["id"] in _held(ev) else "leaf tensor"
    what = f"the {noun} {name}" if name else f"a {noun}"  # not in backticks: `critic.2.weight` is no Python
    return (f"Line {line} (`{code}`) changes {what} between a forward pass and its backward(), which "
            "needs the values the forward pass used. To keep the change (a clip, a renormalisation) with "
            f"correct gradients, make the write {after} (or before the forward pass), under no_grad: "
            f"`with torch.no_grad(): {write}`{call}. Writing into a clone instead would silently drop the "
            "change.")


def later_readers(ev: Evidence, write: dict) -> list[str]:
    """The program's names for other tensors over the memory ``write`` changed (its base, another view) that
    it loads after the write, or [] (see NOTE [A write meant to reach its base])."""
    t = ev.by_id.get(write.get("tensor")) if write else None
    file, line = (write or {}).get("file"), (write or {}).get("line")
    if t is None or not t.get("storage") or not line or statement_at(file, line) is None:
        return []
    mine = set(roots([write.get("alias") or ""]) + roots(t.get("names") or []))
    others = []
    for p in ev.doc.get("tensors") or []:
        if p.get("storage") == t["storage"] and p["id"] != t["id"] and overlaps(t, p):
            others += [r for r in roots(p.get("names") or []) if r not in mine and r not in others]
    return [n for n in others if loads_after(file, line, line, [n])]


_MAX_ELEMENTS = 1 << 16  # past this many elements, memory is compared by byte range alone


def _elements(t: dict) -> set | None:
    """The storage offsets (in elements) of a tensor's elements, from its recorded shape, stride and offset."""
    shape, stride = t.get("shape"), t.get("stride")
    if shape is None or stride is None or len(shape) != len(stride):
        return None
    n = 1
    for d in shape:
        n *= d
    if n > _MAX_ELEMENTS:
        return None
    out = {t.get("storage_offset") or 0}
    for d, st in zip(shape, stride):
        out = {o + i * st for o in out for i in range(d)}
    return out


def overlaps(a: dict, b: dict) -> bool:
    """Whether two tensors on one storage share an element: `q` and `k` of `qkv.unbind(0)` share a storage
    and interleave in it, but a write to `q` never changes `k`."""
    if a.get("dtype") == b.get("dtype"):
        ea, eb = _elements(a), _elements(b)
        if ea is not None and eb is not None:
            return not ea.isdisjoint(eb)
    ra, rb = a.get("byte_range"), b.get("byte_range")
    return not (ra and rb) or (ra[0] < rb[1] and rb[0] < ra[1])


def clone_at_saving(file: str | None, line: int | None, names: list[str]) -> str | None:
    """The saving statement with its first load of one of ``names`` cloned (``z = row * w`` ->
    ``z = row.clone() * w``), or None."""
    stmt = statement_at(file, line)
    wanted = set(roots(names))
    if stmt is None or stmt.lineno != stmt.end_lineno or not wanted:
        return None
    value = getattr(stmt, "value", None)
    for node in ast.walk(value) if value is not None else ():
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in wanted:
            code = linecache.getline(file, line).rstrip("\n")
            if code[node.col_offset:node.end_col_offset] != node.id:  # offsets count bytes: ASCII lines only
                return None
            return without_comment(code[:node.col_offset] + f"{node.id}.clone()" + code[node.end_col_offset:]).strip()
    return None


def keep_write_clone_saved(ev: Evidence, write: dict, saved_tid, saved_file, saved_line) -> str | None:
    """The fix for a write through a view whose base the program reads later: keep the write, clone at the
    saving line (see NOTE [A write meant to reach its base]); None where that is not the case."""
    readers = later_readers(ev, write)
    if not readers:
        return None
    line, alias = write.get("line"), write.get("alias") or "the view"
    code = code_at(write.get("file"), line)
    base = ", ".join(f"`{n}`" for n in readers)
    fixed = clone_at_saving(saved_file, saved_line, ev.tensor_names(saved_tid) + [alias])
    keep = (f"give the op that saved it a copy of its own at line {saved_line}: `{fixed}`" if fixed else
            "clone the tensor where the forward pass uses it, before this write")
    return (f"Line {line} (`{code}`) writes through `{alias}` into memory the program reads again afterwards "
            f"({base}), so the write is meant to stay: keep it, and {keep}. An out-of-place op or a clone of "
            f"`{alias}` would rebind `{alias}` and silently drop the write into {base}.")
