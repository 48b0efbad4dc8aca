"""The `vmap-inplace` kind: inside ``torch.vmap`` an in-place op wrote per-example values into a tensor
that is not batched (made inside the function by a factory such as ``torch.zeros(shape)``, or captured
from outside it)."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, created_at, diagnosis, opening, w, where

KIND = Kind(
    code="vmap-inplace",
    title="Inside vmap, an in-place op wrote a batched value into a tensor that is not batched.",
    explanation=(
        "`torch.vmap` runs the function once for the whole batch: tensors derived from its vmapped inputs "
        "carry a hidden batch dimension, while a tensor made by a factory from a plain shape "
        "(`torch.zeros(x.shape)`, `torch.zeros(3)`) or captured from outside the function has none. An "
        "in-place op must write into a tensor with room for every example, so writing a batched value into "
        "an unbatched tensor is refused."
    ),
    causes=(
        "A buffer made inside the vmapped function with `torch.zeros(x.shape)`/`torch.empty(n)`, then "
        "filled in place (`buf[i] = ...`, `buf.add_(...)`, `buf.copy_(...)`).",
        "A tensor captured from outside the function (a running sum, a cache) updated in place with each "
        "example's value.",
    ),
    fixes=(
        "Make the buffer from a batched tensor so it is batched too: `torch.zeros_like(x)`, "
        "`x.new_zeros(shape)`.",
        "Use the out-of-place op and rebind (`buf = buf + v`), or build the result with `torch.stack`/"
        "`torch.cat` instead of writing into a buffer.",
    ),
)

PATTERNS = (
    Pattern(w("vmap:") + r"\s+(?P<op>[\w.: ]{1,80}?)\(self,\s+\*extra_args\)\s+" + w("is not possible because there exists a Tensor")
            + r"\s+[`']other[`']\s+" + w("in extra_args that has more elements than") + r"\s+[`']self[`']"
            + r"[^\n]{0,600}", lambda m: {"op": m["op"]}),
)

# `output with shape [3] doesn't match the broadcast shape [4, 3]`: an in-place op's result does not fit
# its receiver. Under vmap this is the same mistake when the broadcast shape only adds leading (batch)
# dimensions; outside vmap it is the `other` kind.
_BROADCAST = re.compile(r"output with shape \[(?P<a>[\d, ]*)\] doesn't match the broadcast shape \[(?P<b>[\d, ]*)\]")


def recognise(ev) -> bool:
    """An in-place broadcast error raised while a vmap transform was active (the tracker records the
    functorch transforms in force at the failure: ``failure.transforms``)."""
    f = ev.failure or {}
    return "vmap" in (f.get("transforms") or ()) and bool(_BROADCAST.search(f.get("message") or ""))


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    tid = f.get("tensor")
    label = ev.label(tid) if tid and ev.tensor_names(tid) else (f"`{f['alias']}`" if f.get("alias") else "the tensor")
    made = created_at(ev, tid)
    m = _BROADCAST.search(f.get("message") or "")
    shapes = f" (its shape is [{m['a']}]; the value written has the batched shape [{m['b']}])" if m else ""
    text = f"Line {line} (`{code}`) writes in place into {label} inside `vmap`{shapes}, but {label} is not batched."
    evidence = ["a vmap transform was active when the in-place op raised"]
    outside = ("Do not update a tensor from outside the vmapped function: return the per-example values and "
               "combine them after vmap (`vals = vmap(f)(xs); total = vals.sum(0)`), or use the out-of-place op "
               "and return the result.")
    where_made = _scope(made, file, line) if made else "unknown"
    if made is None:
        text += " It comes from outside the vmapped values (captured, or made from a plain shape)."
        fix = outside
    else:
        mcode = source.code(made.get("file"), made.get("line"))
        how = made.get("how") or "a factory"
        evidence.append(f"{label} created at line {made['line']} by {how}")
        if where_made == "outside":
            text += (f" It was made at line {made['line']} (`{mcode}`), outside the vmapped function, so it has "
                     "no batch dimension, while the value written comes from the vmapped inputs.")
            fix = outside
        else:
            text += (f" It was made at line {made['line']} (`{mcode}`) by {how} from a plain shape, so it has no "
                     "batch dimension, while the value written comes from the vmapped inputs.")
            new = _batched_factory(mcode)
            if new:
                fix = (f"Make it batched where it is created, at line {made['line']}: `{new}` (a `*_like` factory of "
                       "a vmapped input carries the batch dimension); or use the out-of-place op and rebind.")
            else:
                fix = (f"Make it from a vmapped input at line {made['line']} (`torch.zeros_like(x)`, "
                       "`x.new_zeros(shape)`), or use the out-of-place op and rebind.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     evidence=evidence)


def _scope(made: dict, file, line) -> str:
    """Whether the tensor was made in the function that wrote it ("inside"), at a module's top level
    ("outside": a captured global), or elsewhere ("unknown": a helper the vmapped function may call)."""
    write = source.statement_at(file, line)
    create = source.statement_at(made.get("file"), made.get("line"))
    if write is None or create is None:
        return "unknown"
    ws, cs = source.scope_of(write), source.scope_of(create)
    if cs is ws:
        return "inside"
    return "outside" if isinstance(cs, ast.Module) else "unknown"


_FACTORY = re.compile(r"torch\.(zeros|ones|empty)\(\s*(?P<x>[A-Za-z_][\w.]*)\.shape\s*\)")


def _batched_factory(code: str):
    """``torch.zeros(x.shape)`` -> ``torch.zeros_like(x)``: the rewrite of a factory over an input's shape."""
    m = _FACTORY.search(code or "")
    if m is None:
        return None
    return code[:m.start()] + f"torch.{m.group(1)}_like({m['x']})" + code[m.end():]
