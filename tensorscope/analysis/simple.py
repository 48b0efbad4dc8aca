"""The failure kinds raised at one line, where the line itself and a few recorded facts explain it:
leaf-inplace, view-inplace, overlapping-write, non-scalar-backward, non-float-requires-grad,
numpy-requires-grad, resize-requires-grad and other."""

from __future__ import annotations

import ast

from tensorscope.analysis import source
from tensorscope.analysis.common import Evidence, assignable, clone_of, diagnosis, rewrite_out_of_place, where
from tensorscope.report import display_path

_UPDATE_OPS = {"isub", "iadd", "imul", "itruediv", "sub_", "add_", "mul_", "div_", "addcmul_", "addcdiv_",
               "copy_", "lerp_"}
_INIT_OPS = {"setitem", "fill_", "zero_", "uniform_", "normal_", "copy_", "clamp_", "clamp_min_", "clamp_max_",
             "masked_fill_", "index_fill_", "scatter_", "bernoulli_", "random_", "exponential_"}


def _site(ev: Evidence) -> tuple[str | None, int | None, dict]:
    f = ev.failure or {}
    if f.get("line"):
        return f.get("file"), f.get("line"), f
    exc = ev.exception or {}
    return exc.get("file"), exc.get("line"), f


def _tensor(ev: Evidence, tid: str | None, names=None) -> dict | None:
    if not tid:
        return None
    return {"id": tid, "names": list(names or []) or ev.tensor_names(tid), "version_at_save": None,
            "version_now": (ev.by_id.get(tid) or {}).get("version")}


def _created(ev: Evidence, tid: str | None) -> dict | None:
    c = ev.created.get(tid) if tid else None
    if c and c.get("line"):
        return c
    return None


def _name(ev: Evidence, f: dict) -> str:
    names = f.get("names") or ev.tensor_names(f.get("tensor"))
    return names[0] if names else (f.get("alias") or "the tensor")


def _rewrite(segment: str, op: str, alias: str) -> str:
    """The out-of-place form of an in-place statement (``w -= lr * g`` -> ``w = w - lr * g``), else a clone."""
    rewritten = rewrite_out_of_place(segment)
    if rewritten:
        return rewritten
    if assignable(alias):
        return f"{alias} = {alias}.clone()  # then write into the clone"
    return "x = x.clone()  # x: the tensor written; then write into the clone"


def leaf_inplace(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    op, alias = f.get("op") or "", f.get("alias") or _name(ev, f)
    code = source.code(file, line)
    view = bool((ev.parsed.fields if ev.parsed is not None else {}).get("view_of_leaf")) or bool(f.get("base"))
    lib = f.get("library")
    created = _created(ev, f.get("base") if view and f.get("base") else f.get("tensor"))
    what = f"`{alias}` is a view of a leaf tensor that requires grad" if view and op != "setitem" else (
        f"`{alias}` is a leaf tensor that requires grad")
    if op == "setitem" and view:
        what = f"`{source.text(_subscript(code)) or alias}` is a view of `{alias}`, a leaf tensor that requires grad"
    if created:
        what += f" (created at line {created['line']}: `{source.code(created['file'], created['line'])}`)"
    elif alias.endswith((".weight", ".bias")) or "param" in alias:
        what += " (a module parameter)"
    text = (f"{what}. Line {line} (`{code}`) writes into it in place"
            + (f" (inside {lib})" if lib else "") + " while grad mode is on; autograd cannot record a change "
            "to a leaf, so the write is refused.")
    update = ".grad" in code or op in _UPDATE_OPS and "grad" in code
    init = op in _INIT_OPS or update
    if init:
        fix = (f"This is a parameter update or initialisation: do it without recording, "
               f"`with torch.no_grad(): {code}`")
        if "emb" in alias.lower() and op == "setitem":
            fix += " (for an embedding padding row, `nn.Embedding(..., padding_idx=0)` keeps it zero for you)"
        fix += "; or let an optimizer do the update (`torch.optim.SGD(...).step()`)." if update else "."
    else:
        fix = (f"If this is part of the computation, do it out of place so the leaf stays intact: "
               f"`{_rewrite(code, op, alias)}` (or clone first: {clone_of(alias)}); if it is meant "
               f"as an update of the leaf, wrap it in `with torch.no_grad():`.")
    return diagnosis("leaf-inplace", explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=_tensor(ev, f.get("tensor"), f.get("names")),
                     evidence=["the in-place write raised inside its wrapper", "tensor facts: leaf, requires_grad"])


def _subscript(code: str):
    try:
        node = ast.parse(code).body[0]
    except (SyntaxError, IndexError, ValueError):
        return None
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
        return node.targets[0]
    return None


def view_inplace(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    fields = ev.parsed.fields if ev.parsed is not None else {}
    reason = fields.get("reason")
    op, alias = f.get("op") or "", f.get("alias") or _name(ev, f)
    code = source.code(file, line)
    created = _created(ev, f.get("tensor"))
    definition = source.definition(file, line, alias)
    origin_line = created["line"] if created and created.get("file") == file else (definition.lineno if definition else None)
    origin = f"line {origin_line} (`{source.code(file, origin_line)}`)" if origin_line else "an earlier line"
    chain = []
    if origin_line:
        chain.append({"file": display_path(file), "line": origin_line, "code": source.code(file, origin_line),
                      "what": f"`{alias}` is created here as a view"})
    chain.append({"file": display_path(file), "line": line, "code": code, "what": f"writes in place through `{alias}`"})
    rewrite = _rewrite(code, op, alias)
    if reason == "multiple-views":
        node = fields.get("op") or (created or {}).get("how") or "a multi-output op"
        text = (f"`{alias}` comes from {origin}: {node.lower() if isinstance(node, str) else node} returns several "
                f"views of one tensor, and autograd forbids modifying such views in place. Line {line} (`{code}`) "
                "does exactly that.")
        fix = (f"Use the out-of-place op: `{rewrite}`; or clone the view first ({clone_of(alias)}).")
    elif reason in ("no-grad-view", "inference-mode-view"):
        region = None
        if origin_line:
            st = source.statement_at(file, origin_line)
            from tensorscope.analysis.no_grad_fn import _no_grad_region
            region = _no_grad_region(st) if st is not None else None
        block = f" inside the no-grad block at line {region.lineno} (`{source.code(file, region.lineno)}`)" if region else " in no_grad mode"
        text = (f"`{alias}` was created as a view at {origin}{block}, and line {line} (`{code}`) modifies it in "
                "place with grad mode on; autograd cannot tell whether that write should be recorded, so it refuses.")
        fix = (f"Create the view with grad enabled (move `{source.code(file, origin_line) if origin_line else alias}` "
               f"out of the no_grad block) if the write should be tracked; or do the write inside the same no_grad "
               f"block; or clone the view ({clone_of(alias)}) or write out of place: `{rewrite}`.")
    elif reason == "custom-function":
        fn = fields.get("op") or "the custom Function"
        text = (f"`{alias}` is the output of the custom autograd Function {fn} ({origin}), whose forward returns a "
                f"view of its input. Line {line} (`{code}`) modifies it in place, which would bypass the Function's "
                "own backward.")
        fix = (f"Clone the Function's output ({clone_of(alias)}, or return a clone, `x.clone()`, from "
               f"{fn}.forward), or write out of place: `{rewrite}`.")
    else:
        text = f"`{alias}` is a view that autograd does not let line {line} (`{code}`) modify in place."
        fix = f"Write out of place: `{rewrite}`, or clone the view first ({clone_of(alias)})."
    return diagnosis("view-inplace", explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=_tensor(ev, f.get("tensor"), f.get("names")), alias_chain=chain,
                     evidence=[f"message reason: {reason}", "where the view was created"])


def _shape(ev: Evidence, tid: str | None):
    return (ev.by_id.get(tid) or {}).get("shape") if tid else None


def overlapping_write(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    alias = f.get("alias") or _name(ev, f)
    code = source.code(file, line)
    created = _created(ev, f.get("tensor"))
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
    return diagnosis("overlapping-write", explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=_tensor(ev, f.get("tensor"), f.get("names")), alias_chain=chain,
                     evidence=["the write raised inside its wrapper", "how the written tensor was created"])


def _repeat_args(base, target) -> str | None:
    if not base or not target or len(base) > len(target):
        return None
    base = [1] * (len(target) - len(base)) + list(base)
    if any(b not in (1, t) for b, t in zip(base, target)):
        return None
    return ", ".join(str(t if b == 1 else 1) for b, t in zip(base, target))


def non_scalar_backward(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    roots = f.get("roots") or []
    r = roots[0] if roots else {}
    name = (r.get("names") or [None])[0]
    shape = r.get("shape")
    expr = name or "out"
    stmt = source.statement_at(file, line)
    found = source.call_roots(stmt) if stmt is not None else []
    if found:
        expr = source.text(found[0])
    shown = f"shape {tuple(shape)}" if shape is not None else "more than one element"
    text = (f"Line {line} (`{source.code(file, line)}`) calls backward() on `{expr}`, which has {shown}. "
            "backward() without a `gradient` argument only works on a single number (a scalar loss): for a "
            "tensor of several values autograd does not know how to weigh them.")
    fix = (f"Reduce it to a scalar loss first: `{expr}.sum().backward()` or `{expr}.mean().backward()`; or pass the "
           f"weights explicitly: `{expr}.backward(gradient=torch.ones_like({expr}))`.")
    return diagnosis("non-scalar-backward", explanation=text, fix=fix, culprit=where(file, line, alias=expr),
                     backward=where(file, line), tensor=_tensor(ev, r.get("tensor"), r.get("names")),
                     evidence=[f"backward root shape {shape}"])


def _float_literals(call) -> str | None:
    """``torch.tensor([1, 2, 3], requires_grad=True)`` with float literals, or None."""
    if not call.args or not isinstance(call.args[0], (ast.List, ast.Tuple)):
        return None
    changed = False
    for n in ast.walk(call.args[0]):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            n.value = float(n.value)
            changed = True
    return source.text(call) if changed else None


def non_float_requires_grad(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    code = source.code(file, line)
    tid = f.get("tensor")
    info = ev.by_id.get(tid) or {}
    dtype = info.get("dtype")
    name = (f.get("names") or [None])[0] or source.bound_name(file, line) or f.get("alias")
    if f.get("where") == "create" or not tid:
        stmt = source.statement_at(file, line)
        call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and any(
            k.arg == "requires_grad" for k in n.keywords)), None) if stmt is not None else None
        text = (f"Line {line} (`{code}`) creates a tensor with requires_grad=True, but its values are integers, so "
                "its dtype is an integer type; only floating point (and complex) tensors can require gradients.")
        fixed = _float_literals(call) if call is not None else None
        fix = (f"Write float literals: `{fixed}`, or pass `dtype=torch.float32` at line {line}." if fixed else
               f"Create it as floating point at line {line}: add `dtype=torch.float32` (or call `.float()` before "
               "requiring grad).")
        name = source.bound_name(file, line) or name
    else:
        created = _created(ev, tid)
        origin = f", created at line {created['line']} (`{source.code(created['file'], created['line'])}`)" if created else ""
        text = (f"Line {line} (`{code}`) asks `{name}` to require grad, but `{name}` has dtype {dtype or 'integer'}"
                f"{origin}; only floating point (and complex) tensors can require gradients.")
        lname = (name or "").lower()
        if any(w in lname for w in ("label", "target", "idx", "index", "indices", "mask", "token", "class")):
            fix = (f"`{name}` holds integer labels/indices, which need no gradient: remove the requires_grad call at "
                   f"line {line}. If you really want a trainable tensor, make it float: `{name} = {name}.float()` "
                   "before requiring grad.")
        else:
            fix = (f"Make it floating point before requiring grad: `{name} = {name}.float().requires_grad_()` "
                   "(or create it with `dtype=torch.float32`).")
    return diagnosis("non-float-requires-grad", explanation=text, fix=fix,
                     culprit=where(file, line, alias=name), tensor=_tensor(ev, tid, [name] if name else None),
                     evidence=[f"dtype: {dtype}" if dtype else "integer values at creation"])


def numpy_requires_grad(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    alias = f.get("alias") or _name(ev, f)
    info = ev.by_id.get(f.get("tensor")) or {}
    cuda = str(info.get("device") or "").startswith("cuda")
    text = (f"Line {line} (`{source.code(file, line)}`) calls `.numpy()` on `{alias}`, which requires grad "
            f"(grad_fn {info.get('grad_fn') or 'set'}). A NumPy array shares the tensor's memory but autograd "
            "cannot follow it, so PyTorch asks you to leave the graph explicitly.")
    fix = (f"Use `{source.atom(alias)}.detach(){'.cpu()' if cuda else ''}.numpy()` for logging or plotting"
           + ("" if cuda else " (add `.cpu()` for a CUDA tensor)") + "; keep the computation itself in torch ops.")
    return diagnosis("numpy-requires-grad", explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=_tensor(ev, f.get("tensor"), f.get("names")), evidence=["numpy() raised inside its wrapper"])


def resize_requires_grad(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    alias = f.get("alias") or _name(ev, f)
    code = source.code(file, line)
    stmt = source.statement_at(file, line)
    call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("resize_", "resize_as_")), None) if stmt is not None else None
    size = ", ".join(source.text(a) for a in call.args) if call is not None else "..."
    text = (f"Line {line} (`{code}`) resizes `{alias}` in place, but `{alias}` requires grad: autograd cannot "
            "track a change of shape, so resize_() is refused on tensors that require grad.")
    fix = (f"Build a new tensor and copy the old values in, e.g. `new = {alias}.detach().new_zeros({size}); "
           f"new[:{alias}.shape[0]] = {alias}.detach(); {alias} = new.requires_grad_()` (then hand the new tensor "
           "to the module/optimizer), or `torch.cat` the old and new rows.")
    return diagnosis("resize-requires-grad", explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=_tensor(ev, f.get("tensor"), f.get("names")), evidence=["resize_() raised inside its wrapper"])


def other(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    exc = ev.exception or {}
    etype = f.get("exception_type") or exc.get("type") or "An exception"
    message = f.get("message") or exc.get("message") or ""
    code = source.code(file, line)
    lib = f.get("library")
    text = f"Line {line} (`{code}`) raised {etype}: {message}" if line else f"The program raised {etype}: {message}"
    if lib:
        text += f" (inside {lib})"
    if ev.failure is None and not (ev.parsed is not None and ev.parsed.fields.get("reason")):
        # no tensor op raised it and PyTorch's wording is not in it: say so instead of inventing a tensor fix
        text = f"Not a tensor or autograd error: {text[0].lower() + text[1:]}"
    fix = _other_fix(message, file, line, ev)
    return diagnosis("other", explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     evidence=[f"exception: {etype}: {message[:300]}"])


def _other_fix(message: str, file, line, ev: Evidence) -> str:
    import re

    m = re.search(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", message)
    if m:
        return (f"The input has {m[2]} features but the layer expects {m[3]}: make the last dimension of the input "
                f"{m[3]}, or build the layer as `nn.Linear({m[2]}, {m[4]})`.")
    m = re.search(r"target size \(torch\.Size\(\[([\d, ]*)\]\)\) that is different to the input size "
                  r"\(torch\.Size\(\[([\d, ]*)\]\)\)", message)
    if m:
        return (f"The target has shape [{m[1]}] and the prediction [{m[2]}]: make them equal, e.g. "
                "`target.unsqueeze(1)` / `target.view_as(pred)` or `pred.squeeze(1)`.")
    fields = ev.parsed.fields if ev.parsed is not None else {}
    if fields.get("reason") == "expand-size-mismatch":
        return ("expand() can only stretch dimensions of size 1: reshape the tensor first, or use `repeat` for "
                "real copies.")
    if fields.get("reason") == "as-strided-out-of-bounds":
        return ("The sizes and strides given to as_strided() reach past the end of the storage: choose sizes and "
                "strides within it.")
    if fields.get("reason") == "inference-tensor-inplace":
        return "Clone the tensor created under torch.inference_mode() before writing into it (`t = t.clone()`)."
    if ev.failure is None:
        where_ = f" at line {line} (`{source.code(file, line)}`)" if line else ""
        return (f"Not a tensor or autograd error: the {ev.exception.get('type') if ev.exception else 'exception'}"
                f"{where_} comes from the program's own Python logic, so tensorscope has no tensor fix to offer; "
                "fix it as a plain Python error.")
    return (f"PyTorch refused the op at line {line} (`{source.code(file, line)}`): give it the arguments its message "
            "above asks for (shapes, dtypes, devices).") if line else "Read the message above."


EXPLAINERS = {
    "leaf-inplace": leaf_inplace,
    "view-inplace": view_inplace,
    "overlapping-write": overlapping_write,
    "non-scalar-backward": non_scalar_backward,
    "non-float-requires-grad": non_float_requires_grad,
    "numpy-requires-grad": numpy_requires_grad,
    "resize-requires-grad": resize_requires_grad,
    "other": other,
}
