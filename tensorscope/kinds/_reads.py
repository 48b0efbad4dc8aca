"""Whether the program reads a kept value after a write, from its text (torch-free).

NOTE [Read after the write]
A kept alias is only a problem when the program uses it after the write changed it: a view
taken and read before the write is fine. Whether a value is read at run time would need a hook
on every op, so the program's text answers instead: the names the keeping statement bound
(``best = ...``, ``self.best = ...``, ``snaps.append(...)``, ``d[k] = ...``) and the program's names
for the kept tensor, loaded on a line after the writing line, or anywhere in a loop around the
writing line (its next iteration reads after the write). A keeping line whose file cannot be read
counts as read: the hazard is reported rather than hidden. A kept value that died (NOTE [When a
kept value died] in instrument/kept.py) is read only by a load before its death line or in a loop
around the write; the death line is used only where its order against the write is plain (after the
write in the same function, or inside a loop around the write).
"""

from __future__ import annotations

import ast
import linecache
import re

_ROOT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_ADDERS = ("append", "extend", "insert", "update", "setdefault", "add", "__setitem__")


def _tree(file):
    lines = linecache.getlines(file) if file else []
    if not lines:
        return None
    try:
        return ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None


def _target_names(node) -> list[str]:
    """``x`` for a name, ``.attr`` for an attribute, the root of a subscript."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return ["." + node.attr]
    if isinstance(node, ast.Subscript):
        return _target_names(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for e in node.elts for n in _target_names(e)]
    if isinstance(node, ast.Starred):
        return _target_names(node.value)
    return []


def _statement(tree, line):
    """The innermost simple statement spanning ``line``."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def kept_names(file, line, op: str | None = None) -> list[str]:
    """The names the statement at ``file:line`` bound its value to (``.attr`` for an attribute); with ``op`` (the
    call that kept it: ``state_dict``) those of its element first in a tuple assignment."""
    tree = _tree(file)
    if tree is None or not line:
        return []
    st = _statement(tree, line)
    if st is None:
        return []
    return kept_names_of(st, op)


def _call_bound_first(st, names: list, op: str | None = None) -> list:
    """``best_reward, best_state = ep_reward, model.state_dict()``: the names bound to the element that calls
    ``op`` (what kept the tensor) first, else to an element that calls anything; element by element as python
    pairs them (a target and a value tuple of one length, nothing starred)."""
    value = st.value
    if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in value.elts):
        return names
    calls, others = [], []
    for t in st.targets:
        if not isinstance(t, (ast.Tuple, ast.List)) or len(t.elts) != len(value.elts):
            return names
        for target, element in zip(t.elts, value.elts):
            called = [c for c in ast.walk(element) if isinstance(c, ast.Call)]
            if op is not None:
                called = [c for c in called if getattr(c.func, "attr", getattr(c.func, "id", None)) == op]
            (calls if called else others).extend(_target_names(target))
    if not calls and op is not None:
        return _call_bound_first(st, names)
    return calls + [n for n in others if n not in calls] if calls else names


def kept_names_of(st, op: str | None = None) -> list[str]:
    """The names the statement ``st`` bound its value to (``.attr`` for an attribute)."""
    if isinstance(st, ast.Assign):
        names = [n for t in st.targets for n in _target_names(t)]
        return _call_bound_first(st, names, op)
    if isinstance(st, (ast.AnnAssign, ast.AugAssign)):
        return _target_names(st.target)
    if isinstance(st, ast.Return):
        return []
    names = []
    for node in ast.walk(st):  # `snaps.append(w.detach())`, `store[k].copy_(...)`
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ADDERS:
            names += _target_names(node.func.value)
    return names


def roots(names) -> list[str]:
    """The root name of each of the program's names for a tensor bound directly or in a container
    (``best['fc.weight']`` -> ``best``); a module's parameter (``model.fc.weight``) names no kept value."""
    out = []
    for n in names:
        m = _ROOT.match(n)
        if m and (m.end() == len(n) or n[m.end()] == "["):
            out.append(m.group())
    return out


def _function(tree, line):
    """The innermost function spanning ``line`` (None at module level)."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def _after_rebinding(tree, line):
    """The names the statement at ``line`` binds and the line spans of the statements after it in its
    own block: a load of such a name there reads the new binding, never the value that died at ``line``."""
    st = _statement(tree, line)
    if st is None or not isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return set(), []
    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
    bound = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and st in block:
                later = block[block.index(st) + 1:]
                return bound, [(b.lineno, b.end_lineno or b.lineno) for b in later]
    return bound, []


# NOTE [A fresh read]
# A loop that keeps a value and reads it at once (nanoGPT's `checkpoint = {'model': raw_model.state_dict(), ...}`
# then `torch.save(checkpoint, ...)` in the same block, at each evaluation) reads only what that keeping line
# has just bound: the write that changes it comes later in the iteration, and the next read follows the next
# keeping. Such a load, in the keeping statement's own block after it (same function as the write, and not
# after a write that sits between the two), is not a read of the changed value. A load anywhere else in the
# loop, or after it, still is. So is a load in a loop that holds the write but not the keeping line: nanoGPT's
# `train.py` with `w0 = wte.weight.detach().cpu().numpy()` kept before `while True:` and the drift from it
# logged at each evaluation, at the top of the loop (textually before `optimizer.step()`) reads the weight
# the last iteration's step wrote, as the `while` statement follows the keeping line in its block.


def loads_after(file, keep_line, write_line, names, died=None) -> bool:
    """Whether one of ``names`` is loaded after ``write_line`` and before ``died``, the line the kept
    value died on, where known (see NOTE [Read after the write])."""
    tree = _tree(file)
    if tree is None or not keep_line or not write_line:
        return True
    wanted = {n for n in names if not n.startswith(".")}
    attrs = {n[1:] for n in names if n.startswith(".")}
    if not wanted and not attrs:
        return True
    keep = _statement(tree, keep_line)
    skip = range(keep.lineno, (keep.end_lineno or keep.lineno) + 1) if keep is not None else range(0)
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))
             and n.lineno <= write_line <= (n.end_lineno or n.lineno)]
    in_loop = died is not None and any(lp.lineno <= died <= (lp.end_lineno or lp.lineno) for lp in loops)
    if died is not None and not in_loop and (died <= write_line or _function(tree, died) is not _function(tree, write_line)):
        died = None  # its order against the write is not plain from the text: every later load counts
    rebound, later = _after_rebinding(tree, died) if died is not None else (set(), [])
    # loads right after the keeping line in its own block read the value it has just bound (NOTE [A fresh read])
    fresh, fresh_spans = _after_rebinding(tree, keep.lineno) if keep is not None else (set(), [])
    if _function(tree, keep_line) is not _function(tree, write_line):
        fresh = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in wanted:
            pass
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and node.attr in attrs:
            pass
        else:
            continue
        line = node.lineno
        if line in skip:
            continue
        if isinstance(node, ast.Name) and node.id in rebound and any(a <= line <= b for a, b in later):
            continue  # after the line that rebound the name (and freed the kept value) in the same block
        around = [lp for lp in loops if lp.lineno <= line <= (lp.end_lineno or lp.lineno)]
        if around:
            # fresh only where every loop around the load and the write runs the keeping line again first
            # (NOTE [A fresh read]): a value kept before the loop is read changed from its second iteration on
            if isinstance(node, ast.Name) and node.id in fresh and any(a <= line <= b for a, b in fresh_spans) \
                    and not keep_line < write_line < line \
                    and all(lp.lineno <= keep_line <= (lp.end_lineno or lp.lineno) for lp in around):
                continue
            return True
        if line > write_line and (died is None or line <= died):
            return True
    return False
