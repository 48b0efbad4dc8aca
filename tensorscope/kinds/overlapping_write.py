"""The `overlapping-write` kind: an in-place write targets a tensor whose elements share memory."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import (Evidence, Kind, Pattern, created_at, diagnosis, fields, name_of, site, statement,
                                     tensor_of, w, where)
from tensorscope.kinds._fixes import clone_of
from tensorscope.source import display_path

KIND = Kind(
    code='overlapping-write',
    title='An in-place write targets a tensor whose elements share memory.',
    explanation=(
        'The written-to tensor has several elements at one memory location (an `expand`ed or stride-0'
        ' tensor), or it overlaps the input being read. The result would depend on the order of the '
        'writes, so PyTorch refuses the operation.'
    ),
    causes=(
        'An in-place op on the result of `expand`, `expand_as` or a broadcast view.',
        '`out=` or `copy_` into a tensor that overlaps its own source, e.g. `a[1:].copy_(a[:-1])`.',
        'An `as_strided` view with a zero or too-small stride.',
    ),
    fixes=(
        'Clone (or `.contiguous()`) the expanded tensor before writing: `x = x.expand(3, 4).clone()`.',
        'Clone the source before copying: `a[1:].copy_(a[:-1].clone())`.',
        'Use the out-of-place op.',
    ),
)


PATTERNS = (Pattern(w("unsupported operation:") + r"\s+(?:(?P<one>"
                    + w("more than one element of the written-to tensor refers") + r")|"
                    + w("some elements of the input tensor and the written-to tensor refer") + r")\s+"
                    + w("to a single memory location.")
                    + r"(?:\s+" + w("Please clone() the tensor before performing the operation.") + r")?",
                    lambda m: {"reason": "internal-overlap" if m["one"] else "input-overlap"}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    if f.get("reason") == "input-overlap":
        return None, ["The tensor written overlaps the tensor being read."], [
            "Clone the source before the write: `dst.copy_(src.clone())`."]
    return None, ["Several elements of the tensor written share one memory location (expand or a stride-0 "
                  "view)."], ["Write to a copy: `x = x.clone()` (or `x.contiguous()`) before the in-place op."]


def _shape(ev: Evidence, tid: str | None):
    return (ev.by_id.get(tid) or {}).get("shape") if tid else None


def _repeat_args(base, target) -> str | None:
    if not base or not target or len(base) > len(target):
        return None
    base = [1] * (len(target) - len(base)) + list(base)
    if any(b not in (1, t) for b, t in zip(base, target)):
        return None
    return ", ".join(str(t if b == 1 else 1) for b, t in zip(base, target))


def _source_cloned(code: str) -> str | None:
    """The write with what it reads cloned: ``a[1:].copy_(a[:-1])`` -> ``a[1:].copy_(a[:-1].clone())``;
    ``x += x.t()`` -> ``x += x.t().clone()``; ``a[1:] = a[:-1]`` -> ``a[1:] = a[:-1].clone()``."""
    stmt = statement(code)
    node = None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr.endswith("_") and stmt.value.args:
        node, field = stmt.value, "args"
    elif isinstance(stmt, (ast.AugAssign, ast.Assign)):
        node, field = stmt, "value"
    if node is None:
        return None
    value = node.args[0] if field == "args" else node.value
    if isinstance(value, ast.Constant):
        return None
    cloned = ast.Call(func=ast.Attribute(value=value, attr="clone", ctx=ast.Load()), args=[], keywords=[])
    if field == "args":
        node.args[0] = cloned
    else:
        node.value = cloned
    return ast.unparse(stmt)


def _input_overlap(ev: Evidence, file, line, f) -> dict:
    """The tensor written and the one read share memory (``a[1:].copy_(a[:-1])``): the write must read a copy of
    the source, which keeps what the line means (the values before the write); cloning the destination would not
    stop the overlap."""
    alias = f.get("alias") or name_of(ev, f)
    code = source.code(file, line)
    rewrite = _source_cloned(code)
    text = (f"Line {line} (`{code}`) writes in place into `{alias}` while reading a tensor over the same memory, "
            "so elements it reads may already have been written; PyTorch refuses the write.")
    fix = (f"Read a copy of the source: replace the line with `{rewrite}`." if rewrite else
           "Read a copy of the source: `dst.copy_(src.clone())`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")),
                     evidence=["the write raised inside its wrapper", "the input and the written tensor overlap"])


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the write and how the written tensor was made (expand, as_strided): give it its own memory."""
    file, line, f = site(ev)
    if not line:
        return None
    if fields(ev).get("reason") == "input-overlap":
        return _input_overlap(ev, file, line, f)
    alias = f.get("alias") or name_of(ev, f)
    code = source.code(file, line)
    created = created_at(ev, f.get("tensor"))
    chain, fix_make = [], None
    text = (f"Line {line} (`{code}`) writes in place into `{alias}`, in which several elements are the same "
            "memory location (a stride of 0)")
    if created and created.get("how") in ("expand", "expand_as", "as_strided"):
        cline = created["line"]
        ccode = source.code(created["file"], cline)
        text += f": `{alias}` was made by {created['how']}() at line {cline} (`{ccode}`), which repeats one row of memory"
        chain.append({"file": display_path(created["file"]), "line": cline, "code": ccode,
                      "what": f"`{alias}` = {created['how']} of {ev.label(created.get('source'))}: stride 0, no copy"})
        base, target = _shape(ev, created.get("source")), _shape(ev, f.get("tensor"))
        rep = _repeat_args(base, target)
        try:
            value = source.assigned(source.statement_at(created["file"], cline))[1]
        except Exception:
            value = None
        vtext = source.text(value) if value is not None else ""
        if vtext:
            fix_make = f"`{source.bound_name(created['file'], cline) or alias} = {vtext}.clone()`"
            if rep and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "expand":
                fix_make += f" or `{source.bound_name(created['file'], cline) or alias} = {source.text(value.func.value)}.repeat({rep})`"
    text += "; PyTorch refuses the write because its result would depend on the order of the element updates."
    chain.append({"file": display_path(file), "line": line, "code": code, "what": f"writes in place through `{alias}`"})
    fix = ("Give the tensor its own memory before writing: " + (f"{fix_make} at line {chain[0]['line']}"
           if fix_make else f"{clone_of(alias)} (or `.contiguous()`)")
           + "; or replace `expand` by `repeat`, or write out of place.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")), alias_chain=chain,
                     evidence=["the write raised inside its wrapper", "how the written tensor was created"])
