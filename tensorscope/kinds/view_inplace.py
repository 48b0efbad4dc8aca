"""The `view-inplace` kind: a view was modified in place in a way autograd cannot record correctly."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds._base import (
    created_at,
    diagnosis,
    Evidence,
    fields,
    Kind,
    name_of,
    opening,
    Pattern,
    site,
    statement,
    tensor_of,
    user_files,
    w,
    where,
)
from tensorscope.kinds._fixes import clone_of, rewrite_or_clone
from tensorscope.kinds._intent import later_readers
from tensorscope.kinds._message import NAME, node_facts, snake
from tensorscope.kinds._provenance import no_grad_region
from tensorscope.source import display_path

KIND = Kind(
    code='view-inplace',
    title='A view was modified in place in a way autograd cannot record correctly.',
    explanation=(
        "When a view is written in place autograd rewrites the view's and its base's grad_fn. It "
        'cannot do so for a view that is one of several outputs of an op (unbind, split, chunk), for '
        'a view created in no_grad or inference mode and written with grad enabled, or for a view '
        'returned by a custom Function, so the write is refused.'
    ),
    causes=(
        (
            'Writing in place to an output of `unbind`, `split` or `chunk` (or to their base while such '
            'an output is still used).'
        ),
        'Taking a view under `torch.no_grad()` and writing to it, or its base, outside.',
        (
            'Writing in place to a tensor returned by a custom `torch.autograd.Function` that returned a '
            'view of (or exactly) its input.'
        ),
        (
            'An in-place op (`nn.ReLU(inplace=True)`) on the output of a module with a full backward hook '
            '(`register_full_backward_hook`), whose outputs PyTorch returns as-is through BackwardHookFunction.'
        ),
        '`detach_()` called on a view.',
    ),
    fixes=(
        'Replace the in-place op with the out-of-place one.',
        'Clone the view before writing: `v = v.clone()`.',
        'Take the view and do the write both inside, or both outside, the no_grad block.',
        'Clone the output of the custom Function (in its forward or right after apply).',
    ),
)


_MULTI = (
    w("This view is") + r"\s+(?:the|an)\s+" + w("output of a function that returns multiple views.")
    + r"(?:\s+" + w("Such functions do not allow the output views to be modified inplace. "
                    "You should replace the inplace operation by an out-of-place one.")
    + r"|\s+" + w("Inplace operators on such views are being deprecated") + r"[^\n]{0,400})?"
)
_AMBIGUOUS = (
    w("Given that this use case is ambiguous and error-prone, it is forbidden.")
    + r"(?:\s+" + w("You can clarify your code by moving both the view and the inplace either both inside the")
    + r"\s+(?:no_grad|inference_mode)\s+"
    + w("block (if you don't want the inplace to be tracked) or both outside (if you want the inplace "
        "to be tracked).") + r")?"
)
_CUSTOM = (
    w("This view was created inside a custom Function (or because an input was returned as-is)")
    + r"(?:\s+" + w("and the autograd logic to handle view+inplace would override the custom backward "
                    "associated with the custom Function, leading to incorrect gradients. This behavior is "
                    "forbidden. You can fix this by cloning the output of the custom Function.") + r")?"
)
_TAILS = (r"(?:\s+(?P<multi>" + _MULTI + r")|\s+(?P<ambiguous>" + _AMBIGUOUS
          + r")|\s+(?P<custom>" + _CUSTOM + r"))?")
_MODIFIED = (r"(?P<how>is\s+being|" + w("its base or another view of its base has been")
             + r")\s+modified\s+inplace")


def _decode(m: re.Match) -> dict:
    f = {"reason": None, "op": None, "node": None, "node_guessed": False, "output_nr": None,
         "base_modified": not m["how"].startswith("is")}
    gd = m.groupdict()
    if gd.get("nr") is not None:
        f["output_nr"] = int(m["nr"])
        f.update(node_facts(m["op"]))
    if m["multi"]:
        f["reason"] = "multiple-views"
    elif m["custom"]:
        f["reason"] = "custom-function"
    elif gd.get("mode") == "inference":
        f["reason"] = "inference-mode-view"
    elif gd.get("mode") == "no_grad" or m["ambiguous"]:
        f["reason"] = "no-grad-view"
    return f


PATTERNS = (
    # "Output 0 of UnbindBackward0 is a view and is being modified inplace. ..."
    Pattern(r"Output\s+(?P<nr>\d{1,9})\s+of\s+(?P<op>" + NAME + r")\s+" + w("is a view and") + r"\s+"
            + _MODIFIED + r"\." + _TAILS, _decode),
    # "A view was created in no_grad mode and is being modified inplace with grad mode enabled. ..."
    Pattern(w("A view was created in") + r"\s+(?P<mode>no_grad|inference)\s+mode\s+and\s+" + _MODIFIED
            + r"\s+(?:" + w("with grad mode enabled") + r"|" + w("in normal mode") + r")\." + _TAILS, _decode),
    # `v.detach_()` on a view (also DDP's bucket-view gradients, which the message goes on about)
    Pattern(w("Can't detach views in-place. Use detach() instead."),
            lambda m: {"reason": "detach-view", "op": None, "node": None, "node_guessed": False, "output_nr": None,
                       "base_modified": False}),
)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    op, nr, reason = f.get("op"), f.get("output_nr"), f.get("reason")
    evidence, fixes = [], []
    if op:
        evidence.append(f"The view is output {nr} of {op}.")
    if f.get("base_modified"):
        evidence.append("Its base, or another view of its base, was written while the view was still used.")
    if reason == "multiple-views":
        name = snake(op) if op else "the op"
        evidence.append(f"{op or 'The op'} returns several views, whose in-place modification autograd forbids.")
        fixes.append(f"Replace the in-place op on the outputs of {name} with the out-of-place one, or clone "
                     f"them first: `parts = [p.clone() for p in x.{name}(...)]`.")
    elif reason in ("no-grad-view", "inference-mode-view"):
        block = "torch.no_grad()" if reason == "no-grad-view" else "torch.inference_mode()"
        evidence.append(f"The view was created under `{block}` and written with grad mode enabled.")
        fixes.append(f"Take the view outside `{block}`, or do the write inside it too, or clone the view: "
                     "`v = v.clone()`.")
    elif reason == "detach-view":
        evidence.append("`detach_()` was called on a view; a view cannot be detached in place.")
        fixes.append("Detach out of place and rebind: `v = v.detach()`; for gradients under DDP with "
                     "`gradient_as_bucket_view=True`, zero them with `optimizer.zero_grad(set_to_none=True)`.")
    elif reason == "custom-function" and (op or "").startswith("BackwardHookFunction"):
        evidence.append("The tensor passed through a module with a full backward hook (`register_full_backward_hook`), "
                        "whose inputs and outputs PyTorch returns as-is through BackwardHookFunction.")
        fixes.append("Make the in-place op after the hooked module out of place (`nn.ReLU(inplace=False)`), or "
                     "clone its input first (`h = relu(h.clone())`).")
    elif reason == "custom-function":
        evidence.append(f"{op or 'A custom Function'} returned a view of (or exactly) its input.")
        fixes.append(f"Return a clone from {op or 'the Function'}.forward (`return x.clone()`), or clone the "
                     "result of `.apply(...)` before writing to it.")
    return None, evidence, fixes


# NOTE [Hooked module outputs]: `register_full_backward_hook` makes PyTorch pass the module's inputs
# and outputs through BackwardHookFunction, which returns them as-is: autograd then treats them as
# views made by a custom Function, and an in-place op on them (the next `nn.ReLU(inplace=True)`) is
# refused with the custom-Function wording. The fix is on the in-place op, not on the "Function".
_HOOK_FUNCTION = "BackwardHookFunction"


def _inplace_modules(ev) -> list:
    """``(file, line, code, name)`` of the program's statements that build a module with ``inplace=True``."""

    out = []
    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            value = node.value if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            for call in ast.walk(node) if isinstance(node, (ast.Assign, ast.Expr)) else ():
                if isinstance(call, ast.Call) and any(k.arg == "inplace" and isinstance(k.value, ast.Constant)
                                                      and k.value.value is True for k in call.keywords):
                    # the name the module is bound to, when the line binds exactly this module
                    name = ast.unparse(node.targets[0]) if call is value else None
                    out.append((file, node.lineno, source.code(file, node.lineno), name))
                    break
    return out[:3]


def _clone_argument(code: str, module: str):
    """``h = relu(h.clone())`` for a line ``h = relu(h)`` calling the in-place ``module``; else None."""
    stmt = statement(code)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and len(stmt.value.args) == 1 \
            and ast.unparse(stmt.value.func) == module \
            and not stmt.value.keywords and isinstance(stmt.value.args[0], (ast.Name, ast.Attribute)):
        arg = ast.unparse(stmt.value.args[0])
        return f"{ast.unparse(stmt.targets[0])} = {ast.unparse(stmt.value.func)}({arg}.clone())"
    return None


def _hooked_output(ev):
    """The diagnosis of an in-place op on the output of a module with a full backward hook."""

    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    op = f.get("op")
    by = f" (`{op}`)" if op else ""
    text = (f"Line {line} (`{code}`) modifies in place{by} a tensor that passed through a module with a full "
            "backward hook (`register_full_backward_hook`): PyTorch wraps that module's inputs and outputs in "
            f"{_HOOK_FUNCTION}, which returns them as they are, so autograd sees views made by a custom Function "
            "and refuses to let them be modified in place.")
    builders = _inplace_modules(ev)
    fixes = []
    if builders:
        b = builders[0]
        text += f" Line {b[1]} (`{b[2]}`) builds a module with `inplace=True`."
        fixes.append(f"build that module with `inplace=False` (line {b[1]})")
    else:
        fixes.append("make the in-place op after the hooked module out of place (`nn.ReLU(inplace=False)`, "
                     "`F.relu(h)` instead of `F.relu_(h)`)")
    module = builders[0][3] if builders else None
    rewrite = _clone_argument(code, module) if module else None
    if rewrite:
        fixes.append(f"clone its input on this line: `{rewrite}`")
    fixes.append("or observe the gradient with a tensor hook instead (`out.register_hook(fn)` in a forward hook)")
    fix = "The hook is fine; the in-place write is not: " + "; ".join(fixes) + "."
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     evidence=["message reason: custom-function", f"the Function is {_HOOK_FUNCTION}: a module's "
                               "full backward hook"])


def _through_base(origin: str, alias: str, code: str) -> str | None:
    """The write of ``code`` through an indexing view of the base: ``a.mul_(2)`` with ``a, b = h.unbind(0)``
    -> ``h[0].mul_(2)``; ``h.select(1, 0)`` for another dim. None for any other shape of either line."""
    made, write = statement(origin), statement(code)
    if not (isinstance(made, ast.Assign) and len(made.targets) == 1 and isinstance(made.targets[0], ast.Tuple)
            and isinstance(made.value, ast.Call) and isinstance(made.value.func, ast.Attribute)
            and made.value.func.attr == "unbind" and not made.value.keywords):
        return None
    names = [e.id if isinstance(e, ast.Name) else None for e in made.targets[0].elts]
    args = made.value.args
    if alias not in names or len(args) > 1 or (args and not isinstance(args[0], ast.Constant)):
        return None
    i, dim, base = names.index(alias), args[0].value if args else 0, ast.unparse(made.value.func.value)
    view = f"{base}[{i}]" if dim == 0 else f"{base}.select({dim}, {i})"
    if not (isinstance(write, ast.Expr) and isinstance(write.value, ast.Call)
            and isinstance(write.value.func, ast.Attribute) and isinstance(write.value.func.value, ast.Name)
            and write.value.func.value.id == alias):
        return None
    write.value.func.value = ast.parse(view, mode="eval").body
    return ast.unparse(write)


def _detach_view(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    stmt = statement(code)
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "detach_"] if stmt is not None else []
    name = ast.unparse(calls[0].func.value) if calls else None
    text = (f"Line {line} (`{code}`) calls `detach_()` on {f'`{name}`, ' if name else ''}a view of another tensor; "
            "a view shares its base's autograd history and cannot be detached in place.")
    simple = name is not None and isinstance(statement(name), ast.Expr) and isinstance(statement(name).value, ast.Name)
    fix = (f"Detach out of place and rebind the name: replace the line with `{name} = {name}.detach()`." if simple else
           "Detach out of place and rebind the name (`v = v.detach()`); under DDP with "
           "`gradient_as_bucket_view=True`, zero gradients with `optimizer.zero_grad(set_to_none=True)`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=name),
                     evidence=["detach_() raised on a view"])


def _explain_view(ev: Evidence) -> dict | None:
    file, line, f = site(ev)
    if not line:
        return None
    fields = ev.parsed.fields if ev.parsed is not None else {}
    reason = fields.get("reason")
    op, alias = f.get("op") or "", f.get("alias") or name_of(ev, f)
    code = source.code(file, line)
    created = created_at(ev, f.get("tensor"))
    definition = source.definition(file, line, alias)
    origin_line = created["line"] if created and created.get("file") == file else (definition.lineno if definition else None)
    origin = f"line {origin_line} (`{source.code(file, origin_line)}`)" if origin_line else "an earlier line"
    chain = []
    if origin_line:
        chain.append({"file": display_path(file), "line": origin_line, "code": source.code(file, origin_line),
                      "what": f"`{alias}` is created here as a view"})
    chain.append({"file": display_path(file), "line": line, "code": code, "what": f"writes in place through `{alias}`"})
    rewrite = rewrite_or_clone(code, op, alias)
    # NOTE [A write meant to reach its base]: a clone or an out-of-place op would drop the write into memory the
    # program reads later; the fix then keeps the write and changes how the view is made
    readers = later_readers(ev, {"tensor": f.get("tensor"), "file": file, "line": line, "alias": alias})
    read = ", ".join(f"`{n}`" for n in readers)
    dropped = (f" (a clone of `{alias}` or an out-of-place op would not change {read}, which the program reads "
               "after this line)") if readers else ""
    if reason == "multiple-views":
        node = fields.get("op") or (created or {}).get("how") or "a multi-output op"
        text = (f"`{alias}` comes from {origin}: {node.lower() if isinstance(node, str) else node} returns several "
                f"views of one tensor, and autograd forbids modifying such views in place. Line {line} (`{code}`) "
                "does exactly that.")
        fix = (f"Use the out-of-place op: `{rewrite}`; or clone the view first ({clone_of(alias)}).")
        if readers:
            through = _through_base(source.code(file, origin_line) if origin_line else "", alias, code)
            how = (f"replace the line with `{through}`" if through else
                   f"index the base as `{alias}` was taken (`base[i]` for `base.unbind()[i]`, a slice for "
                   "`split`/`chunk`) and write into that")
            fix = (f"Write through an ordinary view of the base instead, so the change still reaches {read}: "
                   f"{how}{dropped}.")
    elif reason in ("no-grad-view", "inference-mode-view"):
        region = None
        if origin_line:
            st = source.statement_at(file, origin_line)
            region = no_grad_region(st) if st is not None else None
        block = f" inside the no-grad block at line {region.lineno} (`{source.code(file, region.lineno)}`)" if region else " in no_grad mode"
        text = (f"`{alias}` was created as a view at {origin}{block}, and line {line} (`{code}`) modifies it in "
                "place with grad mode on; autograd cannot tell whether that write should be recorded, so it refuses.")
        move = (f"Create the view with grad enabled (move `{source.code(file, origin_line) if origin_line else alias}` "
                f"out of the no_grad block) if the write should be tracked; or do the write inside the same no_grad "
                f"block")
        fix = (move + f"; or clone the view ({clone_of(alias)}) or write out of place: `{rewrite}`." if not readers
               else move + f"{dropped}.")
    elif reason == "custom-function":
        fn = fields.get("op") or "the custom Function"
        text = (f"`{alias}` is the output of the custom autograd Function {fn} ({origin}), whose forward returns a "
                f"view of its input. Line {line} (`{code}`) modifies it in place, which would bypass the Function's "
                "own backward.")
        fix = (f"Clone the Function's output ({clone_of(alias)}, or return a clone, `x.clone()`, from "
               f"{fn}.forward), or write out of place: `{rewrite}`.")
        if readers:
            fix = (f"Write into the Function's input before calling it (or in its forward), so the change reaches "
                   f"{read}{dropped}.")
    else:
        text = f"`{alias}` is a view that autograd does not let line {line} (`{code}`) modify in place."
        fix = f"Write out of place: `{rewrite}`, or clone the view first ({clone_of(alias)})." if not readers else \
            f"Write into the base itself rather than through `{alias}`{dropped}."
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")), alias_chain=chain,
                     evidence=[f"message reason: {reason}", "where the view was created"])


def explain(ev):
    """The diagnosis of this kind from the evidence: a detach_() of a view, a hooked module's output, or a view
    written in place."""

    if fields(ev).get("reason") == "detach-view":
        return _detach_view(ev)

    if fields(ev).get("reason") == "custom-function" and (fields(ev).get("op") or "").startswith(_HOOK_FUNCTION):
        d = _hooked_output(ev)
        if d is not None:
            return d
    return _explain_view(ev)
