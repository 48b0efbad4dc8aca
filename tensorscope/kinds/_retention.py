"""Retention hazards: memory a name keeps alive across steps, explained at the line that stored it.

Torch-free: it reads the raw facts of instrument/growth.py and instrument/retention.py (a holder
name, the path of labels from it to the retained storage, bytes per step, the allocating line) and the
program's source. NOTE [The retaining line]: the culprit is the statement that stored the retained
object where the next step still reaches it: the object right before the first tensor on the path
(a container, an attribute, a closure variable, or the name itself) is matched against the program's
statements that store into it (``history.append(x)``, ``cache[k] = x``, ``self.h = x``, ``total += x``),
preferring one inside a loop; the fix rewrites that statement (``.item()``, ``.detach()``, ``.clone()``).
"""

from __future__ import annotations

import ast
import linecache
import os
import re

from tensorscope import source
from tensorscope.holder_path import json_steps
from tensorscope.kinds._base import diagnosis, where
from tensorscope.source import display_path, without_comment
from tensorscope.units import human_bytes as human

CODES = ("graph-kept-alive", "view-pins-storage", "hook-holds-tensors", "container-grows")
_TENSOR_VIAS = ("grad_fn", "saved", "next", "base", "grad", "variable", "ctx")
_MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "appendleft", "__setitem__"}


def path_text(steps) -> str:
    """``history -> [17] -> .grad_fn MmBackward0 -> saved `self```"""
    return " -> ".join(s.get("label", "?") for s in steps or ())


def store_target(steps) -> tuple[str, str | None]:
    """What the retained tensor was stored into: ("name", n), ("item", container), ("attr", a)."""
    steps = list(steps or ())
    first = next((i for i, s in enumerate(steps) if s.get("via") in _TENSOR_VIAS), len(steps))
    # the first tensor on the path is the step before the first graph/base step (or the last step)
    t = max(0, first - 1) if first < len(steps) else len(steps) - 1
    if t <= 0:
        return "name", steps[0]["label"] if steps else None
    into = steps[t]
    prev = steps[t - 1]
    if into.get("via") == "item":
        k = t - 1
        while k > 0 and steps[k].get("via") == "item":  # `acts[layer][3]`: the container is `acts`
            k -= 1
        return "item", _container_name(steps[k])
    if into.get("via") == "attr":
        return "attr", into["label"].lstrip(".")
    if into.get("via") == "closure":
        return "name", into["label"].split("`")[1] if "`" in into["label"] else None
    return "name", steps[0]["label"]


def _container_name(step) -> str | None:
    label = step.get("label", "")
    if step.get("via") == "closure" and "`" in label:
        return label.split("`")[1]
    if step.get("via") == "attr":
        return label.lstrip(".").split("[")[0]
    if step.get("via") == "name":
        return label
    return None


def _last_name(expr) -> str | None:
    while isinstance(expr, ast.Subscript):  # `self.acts[layer]` stores into `acts`
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def stores(tree, kind: str, name: str | None) -> list[tuple[ast.stmt, ast.AST | None]]:
    """The statements that store into ``name`` as ``kind`` says, with the stored expression."""
    out = []
    if tree is None or not name:
        return out
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        if kind == "item":
            # a mutator call anywhere in a simple statement: `acts.append(o)` alone, or inside a lambda
            # given to `register_forward_hook`, a conditional expression, a comprehension
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr in _MUTATORS and _last_name(c.func.value) == name] \
                if not hasattr(node, "body") else []
            if calls:
                out.append((node, calls[0].args[-1] if calls[0].args else None))
            elif isinstance(node, ast.Assign):
                for tgt in node.targets:
                    if isinstance(tgt, ast.Subscript) and _last_name(tgt.value) == name:
                        out.append((node, node.value))
            elif isinstance(node, ast.AugAssign) and (_last_name(node.target) == name or (
                    isinstance(node.target, ast.Subscript) and _last_name(node.target.value) == name)):
                out.append((node, node.value))
        elif kind == "attr":
            if isinstance(node, ast.Assign):
                for tgt in node.targets:
                    if isinstance(tgt, ast.Attribute) and tgt.attr == name:
                        out.append((node, node.value))
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute) and node.target.attr == name:
                out.append((node, node.value))
        else:
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                out.append((node, node.value))
            elif isinstance(node, ast.Assign) and any(name in source.target_names(t) for t in node.targets):
                if name in source.reads(node.value):  # `total = total + loss`, `out, hidden = model(x, hidden)`
                    out.append((node, node.value))
    return out


def _in_loop(stmt) -> bool:
    return source.loop_of(stmt) is not None


def _score(stmt, expr) -> tuple:
    """Which store is the retaining one: in a loop, then outside ``__init__`` (an initial value is not
    what carries a graph), then storing a computed value rather than a fresh factory call, then the later line."""
    scope = source.scope_of(stmt)
    init = isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.name == "__init__"
    factory = isinstance(expr, ast.Call) and not source.reads(expr)
    return (_in_loop(stmt), not init, not factory, stmt.lineno)


def holder_name(steps) -> str | None:
    """The holder as code: ``model.h``, ``history``, ``cache['k']``: the leading name and attributes."""
    out = ""
    for s in steps or ():
        via, label = s.get("via"), s.get("label", "")
        if via == "name":
            out = label
        elif via == "attr" and label.startswith("."):
            out += label
        else:
            break
    return out or None


def _files(ev, h) -> list[str]:
    files = []
    alloc = h.get("alloc") or {}
    prog = ((ev.doc or {}).get("program") or {}).get("path")
    for f in [alloc.get("file"), prog] + [e.get("file") for e in (ev.doc or {}).get("events") or ()]:
        if f and f not in files and not f.startswith("<"):
            files.append(f)
    return files


def _targets(steps) -> list:
    """Where the retained object may have been stored, innermost first: the step before the first tensor,
    then each step towards the name (`best_models -> [3] -> .0 -> .weight`: `.weight`, then `best_models`)."""
    steps = list(steps or ())
    out = []
    for j in range(len(steps), 0, -1):
        kind, name = store_target(steps[:j])
        for cand in ((kind, name), ("name", name)) if kind == "item" else ((kind, name),):
            if cand not in out and cand[1]:
                out.append(cand)
    return out


def retaining_line(ev, h) -> tuple[str | None, ast.stmt | None, ast.AST | None]:
    """(file, statement, stored expression) of the line that stored what the holder keeps."""
    best = None
    for k, n in _targets(h.get("path")):
        for f in _files(ev, h):
            full = os.path.abspath(f)
            tree = source.tree(full) or source.tree(f)
            for stmt, expr in stores(tree, k, n):
                score = _score(stmt, expr)
                if best is None or score > best[0]:
                    best = (score, full, stmt, expr)
        if best is not None:
            break
    if best is None and any(st.get("via") == "hook" for st in h.get("path") or ()):
        for f in _files(ev, h):  # NOTE [A hook's registering line]
            full = os.path.abspath(f)
            for stmt, expr in _registrations(source.tree(full) or source.tree(f)):
                score = (_in_loop(stmt) or _called_in_loop(stmt), _score(stmt, expr))
                if best is None or score > best[0]:
                    best = (score, full, stmt, expr)
    if best is None:
        return None, None, None
    return best[1], best[2], best[3]


# NOTE [A hook's registering line]
# A hook that keeps tensors through what it captured (a default argument, a bound object's attribute)
# rather than by storing into a container has no store statement to find: the reference that keeps
# them is made by the `register_*_hook` call that put the hook in the module's (or tensor's) hook dict
# and whose handle was never removed. That call is the culprit, preferring one in a loop or in a
# function called from a loop (`FaultInjector(model)` per trial registers a hook per trial).


def _registrations(tree):
    out = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            for c in ast.walk(node):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                        and c.func.attr.startswith("register_") and c.func.attr.endswith("hook"):
                    out.append((node, c))
                    break
    return out


def _called_in_loop(stmt) -> bool:
    """Whether the function (or the class, for ``__init__``) around ``stmt`` is called inside a loop of its file."""
    scope = source.scope_of(stmt)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    name = scope.name
    if name == "__init__":
        cls = next((a for a in source.ancestors(scope) if isinstance(a, ast.ClassDef)), None)
        name = cls.name if cls is not None else name
    root = next((a for a in source.ancestors(scope) if isinstance(a, ast.Module)), None)
    for c in ast.walk(root) if root is not None else ():
        if isinstance(c, ast.Call) and _last_name(c.func) == name and source.loop_of(c) is not None:
            return True
    return False


def _detached_literal(expr) -> str:
    """``{"loss": loss, "n": n}`` -> ``{"loss": loss.detach(), "n": n.detach()}`` (each value detached)."""
    if isinstance(expr, ast.Dict):
        items = ", ".join(f"{source.text(k)}: {source.atom(source.text(v))}.detach()" if k is not None
                          else f"**{source.text(v)}" for k, v in zip(expr.keys, expr.values))
        return "{" + items + "}"
    items = ", ".join(f"{source.atom(source.text(v))}.detach()" for v in expr.elts)
    if isinstance(expr, ast.List):
        return f"[{items}]"
    return f"({items},)" if len(expr.elts) == 1 else f"({items})"


def _replace(file, stmt, expr, new: str) -> str | None:
    """The statement's line with ``expr`` replaced by ``new`` (by its columns), as the report quotes code."""
    if not (stmt.lineno == expr.lineno == expr.end_lineno):
        return None
    raw = linecache.getline(file, stmt.lineno)
    if not raw:
        return None
    b = raw.encode("utf-8")  # ast columns are byte offsets
    text = (b[:expr.col_offset] + new.encode("utf-8") + b[expr.end_col_offset:]).decode("utf-8", "replace")
    return without_comment(text.strip())


_TENSOR_SEQUENCE_OPS = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack"})


def _read_as_tensors(file, holder) -> bool:
    """Whether the program passes what ``holder`` holds to an op that takes a sequence of tensors
    (``torch.stack(recent_losses)``): there a Python number (``.item()``) would raise, a detached tensor would not."""
    name = (holder or "").split(".")[0].split("[")[0]
    tree = source.tree(file) if name else None
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TENSOR_SEQUENCE_OPS \
                and any(isinstance(n, ast.Name) and n.id == name for a in node.args for n in ast.walk(a)):
            return True
    return False


def _extended_by(stmt, expr) -> bool:
    """Whether ``expr`` is the iterable of an ``extend``/``extendleft`` call in ``stmt``: it holds what is stored."""
    return expr is not None and any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("extend", "extendleft")
        and any(a is expr for a in c.args) for c in ast.walk(stmt))


def _sole_argument(stmt, expr) -> bool:
    return any(isinstance(c, ast.Call) and len(c.args) == 1 and not c.keywords and c.args[0] is expr
               for c in ast.walk(stmt))


# NOTE [Small views that pin their storages]
# `history.append(output[0])` each step, `output` a 47.6 KB batch of log-probabilities (pytorch/examples' gcn with
# a row kept for a plot): the list grows by the outputs' whole storages, 93 KB a step for 56 B of values. The
# storages are under view-pins-storage's 1 MB, so the growth is container-grows, whose fix (clear the list, keep
# numbers) misses the cause. Where the witness item's storage is at least PIN_RATIO times its own bytes, the fix
# copies the slice (`.clone()`), as view-pins-storage's does; with the copy the list grows by its items' bytes only.
_PIN_RATIO = 4  # instrument/retention.py's PIN_RATIO (not imported: the kinds read a report, not the recorder)


def _pins(h: dict) -> bool:
    nbytes, storage = h.get("nbytes") or 0, h.get("storage_nbytes") or 0
    return nbytes > 0 and storage >= _PIN_RATIO * nbytes


def _fix(fam: str, h: dict, stmt, expr, file) -> str:
    code = source.code(file, stmt.lineno) if stmt is not None else ""
    scalar = h.get("shape") == [] or h.get("shape") == ()
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Tuple) and h.get("holder"):
        name = h["holder"]
        return (f"Detach `{name}` before line {stmt.lineno} reads it again (`{name} = {name}.detach()`; for a "
                f"tuple, `{name} = tuple(t.detach() for t in {name})`): each step's graph is then freed with the step.")
    if stmt is not None and expr is not None:
        seg = source.text(expr)
        if fam == "graph-kept-alive" and isinstance(expr, (ast.Dict, ast.List, ast.Tuple)):
            new = _detached_literal(expr)
        elif fam == "graph-kept-alive" and _extended_by(stmt, expr):
            # `history.extend(policy.saved_log_probs)` stores each item of a list: `.detach()` is the items'
            new = f"t.detach() for t in {seg}" if _sole_argument(stmt, expr) else f"(t.detach() for t in {seg})"
        elif fam == "graph-kept-alive":
            number = ((scalar and not _read_as_tensors(file, h.get("holder"))) or isinstance(stmt, ast.AugAssign)) \
                and not _is_default(expr)  # NOTE [A function kept with a tensor as its default]
            new = f"{source.atom(seg)}.item()" if number else f"{source.atom(seg)}.detach()"
        elif fam == "view-pins-storage":
            new = f"{source.atom(seg)}.clone()"
        elif fam == "hook-holds-tensors":
            new = None
        elif scalar:
            new = f"{source.atom(seg)}.item()"
        elif _pins(h):  # NOTE [Small views that pin their storages]
            new = f"{source.atom(seg)}.clone()"
        elif h.get("device") in (None, "cpu"):
            new = None  # NOTE [A host container's fix]
        else:
            new = f"{_detached(source.atom(seg))}.cpu()"
        rewritten = _replace(file, stmt, expr, new) if new else None
        if rewritten:
            if fam == "graph-kept-alive":
                other = " (or `.detach()` it)" if new.endswith(".item()") else ""
                return (f"Store a value without its graph: `{rewritten}`{other}: the graph of every "
                        "step is then freed with the step.")
            if fam == "view-pins-storage" and h.get("save"):
                return f"Save a copy of just the slice: `{rewritten}` (the file then holds only its bytes)."
            if fam == "view-pins-storage":
                return (f"Keep a copy of just the slice: `{rewritten}`: the slice then owns a storage of its "
                        "own size and the large one is freed.")
            if _pins(h):
                return (f"Keep a copy of just the slice: `{rewritten}`: each item kept is a view that keeps its whole "
                        f"storage alive ({human(h.get('storage_nbytes'))} for its {human(h.get('nbytes'))}); a copy "
                        "owns a storage of its own size. Bound what is kept too if it need not grow.")
            return (f"Bound what is kept (clear it each epoch, keep the last N, or keep Python numbers): e.g. "
                    f"`{rewritten}` to keep it off the device, or `del` it once used.")
    if fam == "hook-holds-tensors":
        return ("Remove the hook once it has served (`handle = m.register_forward_hook(...)`; `handle.remove()`), "
                "or have it keep only what the next step needs (clear its list each step; store `.detach()`ed, "
                "reduced values).")
    if fam == "graph-kept-alive":
        return "Store `.item()` or `.detach()` values in what outlives the step, not tensors with a graph."
    if fam == "view-pins-storage" and h.get("save"):
        item = (h.get("save") or {}).get("item")
        what = f"the tensor at `{item}` of what is saved" if item else "the tensor"
        return (f"Save a copy of just the slice: `.clone()` {what} before torch.save (the file then holds only "
                "its bytes, not its whole storage).")
    if fam == "view-pins-storage":
        return "Store `.clone()` of the slice, not the slice: a view keeps its base's whole storage alive."
    return ("Bound what is kept: clear the container each step or epoch (`.clear()`), keep only the last N "
            "entries, or store Python numbers (`.item()`, a reduced value) instead of tensors; `del` an entry "
            "once it is used.")


# NOTE [A host container's fix]
# A container that grows with tensors already in host memory is not helped by `.detach().cpu()`: the
# rewritten program keeps the same bytes and grows the same (tests/test_fix_runs.py runs it). Only a
# device tensor moved to the host frees device memory; for a host tensor the fix is to bound what is
# kept, which needs the program's own choice of what to drop, so it is said in words.


def _detached(expr: str) -> str:
    """``expr.detach()``, once: an expression that already ends with ``.detach()`` is kept as it is."""
    return expr if expr.endswith(".detach()") else f"{expr}.detach()"


def _saved_view(h: dict):
    """(file, statement, expression) of the view passed to ``torch.save`` at the recorded call."""
    at = h.get("save") or {}
    stmt = source.statement_at(at.get("file"), at.get("line"))
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Call) and _last_name(node.func) == "save" and node.args:
            return at.get("file"), stmt, _item_of(node.args[0], at.get("item") or "")
    return at.get("file"), stmt, None


def _item_of(expr, item: str):
    """The expression of the saved tensor inside the literal passed to torch.save (``{'emb': emb[:10]}``
    and ``['emb']`` give ``emb[:10]``), or None when it is not written out there."""
    try:
        keys = [ast.literal_eval(k) for k in re.findall(r"\[([^\[\]]*)\]", item)]
    except (ValueError, SyntaxError):
        return None
    for k in keys:
        if isinstance(expr, ast.Dict):
            expr = next((v for kk, v in zip(expr.keys, expr.values)
                         if isinstance(kk, ast.Constant) and kk.value == k), None)
        elif isinstance(expr, (ast.List, ast.Tuple)) and isinstance(k, int) and 0 <= k < len(expr.elts):
            expr = expr.elts[k]
        else:
            return None
        if expr is None:
            return None
    return expr


# NOTE [A function kept with a tensor as its default]
# ``log_lines.append(lambda it=iter, l=loss: f"{it} {l.item():.4f}")`` each step (a deferred log line): the list
# keeps functions, and each function keeps that step's loss, with its graph, as a default argument (the walk's
# ``default i`` step: instrument/retention.py ``_function``). The stored expression is the lambda; a fix rewritten
# on it (``(lambda ...).item()``) is no program. The value to rewrite is the lambda's default, ``loss``: the fix
# detaches it there (``l=loss.detach()``: the function's body still gets a tensor, so no ``.item()``).


def _default_value(path, expr):
    """The default argument ``expr`` (a stored ``lambda``) keeps, where the path goes through it; else ``expr``."""
    if not isinstance(expr, ast.Lambda):
        return expr
    for st in path or ():
        m = re.fullmatch(r"default (\d+)", st.get("label", "")) if st.get("via") == "closure" else None
        if m:
            defaults = expr.args.defaults
            i = int(m.group(1))
            return defaults[i] if i < len(defaults) else expr
    return expr


def _is_default(expr) -> bool:
    """Whether ``expr`` is a default value of a ``lambda``'s or a function's arguments."""
    p = source.parent(expr) if expr is not None else None
    return isinstance(p, ast.arguments) and any(d is expr for d in p.defaults)


def explain(ev, h: dict, kind) -> dict:
    """The hazard (DIAGNOSIS shape, plus ``retention``) of one retention finding."""
    fam = h.get("kind")
    file, stmt, expr = _saved_view(h) if h.get("save") else retaining_line(ev, h)
    expr = _default_value(h.get("path"), expr)
    alloc = h.get("alloc") or {}
    holder = h.get("holder")
    per = h.get("bytes_per_step") or 0
    nodes = h.get("nodes_per_step") or 0
    shown = path_text(h.get("path"))
    if h.get("save"):
        grow = (f"torch.save writes the whole storage of a view: {human(h.get('storage_nbytes'))} for the "
                f"{human(h.get('nbytes'))} the view reaches")
    elif h.get("at_end"):
        grow = (f"At the end of the run a view of {human(h.get('nbytes'))} keeps its whole storage of "
                f"{human(h.get('storage_nbytes'))} alive")
    else:
        amount = " and ".join(x for x in (f"{human(per)}" if per else "", f"{nodes} graph nodes" if nodes else "") if x)
        amount += " per step"
        grow = f"`{holder}` grows by {amount} (sampled at {_unit(h)} {', '.join(map(str, h.get('steps') or []))})"
    parts = [f"{grow}: {shown}." if shown else f"{grow}."]
    if stmt is not None and h.get("save"):
        parts.append(f"Line {stmt.lineno} (`{source.code(file, stmt.lineno)}`) saves the view, not a copy.")
    elif stmt is not None:
        parts.append(f"Line {stmt.lineno} (`{source.code(file, stmt.lineno)}`) stores it where the next step "
                     "still reaches it.")
    if alloc.get("line"):
        parts.append(f"The retained memory was allocated at line {alloc['line']} "
                     f"(`{source.code(alloc.get('file'), alloc['line'])}`).")
    sliced = h.get("sliced") or alloc  # a pinning view with no store found: the line that took the view
    culprit = where(file, stmt.lineno, alias=holder) if stmt is not None else (
        where(sliced.get("file"), sliced.get("line"), alias=holder) if sliced.get("line") else None)
    allocation = ({"file": display_path(alloc.get("file")), "line": alloc.get("line"),
                   "code": source.code(alloc.get("file"), alloc.get("line")), "how": alloc.get("how")}
                  if alloc.get("line") else None)
    d = diagnosis(
        kind, explanation=" ".join(parts), fix=_fix(fam, h, stmt, expr, file), culprit=culprit,
        saved_by=where(alloc.get("file"), alloc.get("line"), what="allocated the retained memory") if alloc.get("line") else None,
        tensor={"id": h.get("tensor"), "names": [holder] if holder else [], "version_at_save": None, "version_now": None},
        evidence=["retention walk from the program's names (no gc pass)",
                  f"live bytes per name sampled at {_unit(h)}" if not h.get("at_end") else "views alive at the end"],
    )
    d["retention"] = {
        "holder": holder, "where": h.get("where"), "path": json_steps(h.get("path")),
        "path_text": shown, "bytes_per_step": per, "nodes_per_step": nodes, "bytes": h.get("bytes"),
        "steps": list(h.get("steps") or []), "allocation": allocation,
        "nbytes": h.get("nbytes"), "storage_nbytes": h.get("storage_nbytes"),
    }
    return d


def _unit(h: dict) -> str:
    """What the samples' steps count (NOTE [Steps without backward] in instrument/growth.py)."""
    return "top-level module calls" if h.get("unit") == "forward" else "backward calls"
