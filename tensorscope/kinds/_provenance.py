"""Where a graph was cut, for no-grad-fn (backward() on a tensor with no graph behind it) and view-inplace.

Runtime provenance decides (see NOTE [Provenance of a missing graph]): the recorded calls that
took a tensor which had a graph out of autograd (``.detach()``, ``.data``, ``.item()``,
``.numpy()``, ``torch.tensor(...)`` of tensors), ``Distribution.sample()``, ``autograd.grad``
without ``create_graph``, ``requires_grad = False`` and the grad-mode regions the program
entered. The source is read to quote lines and to word fixes; a static backward slice over it
remains only for cuts no wrapper sees (``argmax``, comparisons), when nothing was recorded.

NOTE [Provenance of a missing graph]
Only entry points are wrapped (NOTE [Hot path] in instrument/patches.py), so the ops between a
cut and the root are not seen and nothing is walked while the program runs. Each recorded cut
carries what it cut: whether its input required grad at that moment (a ``.detach()`` inside a
no_grad block, or of a frozen model's output, cut nothing). When backward fails, the window
is the events since the last backward that succeeded: the first cut in it of a tensor that
had a graph is the culprit; else frozen parameters; else the grad-mode region (``with
torch.no_grad()``, a ``@torch.no_grad()`` function, ``set_grad_enabled(False)``) the program
entered last in that window, by the file and line where it was entered (an earlier one is
typically a target or teacher computed without grad on purpose).
"""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Evidence
from tensorscope.kinds.double_backward_unsupported import once_differentiable_backwards
from tensorscope.source import code_at, display_path

_INTEGER_METHODS = {"argmax", "argmin", "argsort", "long", "int", "bool", "short", "byte"}
_COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne", "less", "greater", "less_equal", "greater_equal", "not_equal"}
_LEAVE_METHODS = {"item": "item", "tolist": "tolist", "numpy": "numpy", "detach": "detach", "detach_": "detach"}
_REWRAP = {"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor",
           "torch.from_numpy", "tensor", "as_tensor", "from_numpy"}
_NO_GRAD = {"torch.no_grad", "no_grad", "torch.inference_mode", "inference_mode", "torch.set_grad_enabled",
            "set_grad_enabled"}
_NUMPY_TO_TORCH = {"clip": "torch.clamp", "exp": "torch.exp", "log": "torch.log", "abs": "torch.abs",
                   "maximum": "torch.maximum", "minimum": "torch.minimum", "tanh": "torch.tanh", "sqrt": "torch.sqrt",
                   "mean": "torch.mean", "sum": "torch.sum", "where": "torch.where", "sign": "torch.sign"}


def _cut_of(node) -> tuple[str, ast.AST] | None:
    """(what, the expression cut off) when ``node`` leaves autograd."""
    if isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.ctx, ast.Load):
        return "data", node.value
    if isinstance(node, ast.Compare) and not any(isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in node.ops):
        return "compare", node
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    name = source.dotted(f)
    if isinstance(f, ast.Attribute):
        if f.attr in _LEAVE_METHODS and not name.startswith(("np.", "numpy.")):
            return _LEAVE_METHODS[f.attr], f.value
        if f.attr in _INTEGER_METHODS and not name.startswith(("np.", "numpy.")):
            return "integer:" + f.attr, f.value
    if name in ("torch.argmax", "torch.argmin", "torch.argsort"):
        return "integer:" + name.split(".")[-1], node.args[0] if node.args else node
    if name in _REWRAP and node.args and any(isinstance(n, ast.Name) for n in ast.walk(node.args[0])):
        return ("from_numpy" if name.endswith("from_numpy") else "rewrap"), node.args[0]
    if isinstance(f, ast.Name) and f.id in ("float", "int") and node.args and not isinstance(node.args[0], ast.Constant):
        return "float", node.args[0]
    return None


def no_grad_region(stmt) -> ast.AST | None:
    """The ``with torch.no_grad():`` (or inference_mode / set_grad_enabled(False)) around a statement."""
    for a in source.ancestors(stmt):
        if isinstance(a, (ast.With, ast.AsyncWith)):
            for item in a.items:
                e = item.context_expr
                if isinstance(e, ast.Call) and source.dotted(e.func) in _NO_GRAD:
                    if source.dotted(e.func).endswith("set_grad_enabled"):
                        if not (e.args and isinstance(e.args[0], ast.Constant) and e.args[0].value is False):
                            continue
                    return a
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in a.decorator_list:
                if source.dotted(d.func if isinstance(d, ast.Call) else d) in _NO_GRAD:
                    return d
            return None
    return None


class _Slice:
    """Statements the root of a backward depends on, with their distance from it."""

    def __init__(self, file: str, module: ast.Module):
        self.file = file
        self.module = module
        self.items: list[tuple[int, ast.AST]] = []  # (depth, statement or expression)
        self.seen: set = set()
        self.defs = {n.name: n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}

    def add_expr(self, expr, scope, before: int, depth: int, in_loop=None) -> None:
        if depth > 40:
            return
        self.items.append((depth, expr))
        self._calls(expr, scope, depth)
        stmts = source.scope_statements(scope)
        for name in source.reads(expr):
            self.add_name(name, scope, stmts, before, depth + 1, in_loop)

    def add_name(self, name, scope, stmts, before, depth, in_loop) -> None:
        defs = [s for s in stmts if name in source.assigned(s)[0] and s.lineno < before]
        if not defs and in_loop is not None:  # first iteration of a loop: the assignment below us
            defs = [s for s in source.scope_statements(in_loop) if name in source.assigned(s)[0]]
        if not defs:
            return
        s = defs[-1]
        key = (id(s), name)
        if key in self.seen:
            return
        self.seen.add(key)
        value = source.assigned(s)[1]
        self.items.append((depth, s))
        if value is not None:
            self._calls(value, scope, depth)
            for n in source.reads(value):
                self.add_name(n, scope, stmts, s.lineno, depth + 1, source.loop_of(s))
        if isinstance(s, ast.AugAssign):
            self.add_name(name, scope, stmts, s.lineno, depth + 1, None)

    def _calls(self, expr, scope, depth) -> None:
        """Follow calls into the program's own functions and ``forward`` methods."""
        for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
            target = self._callee(call, scope)
            if target is None or ("def", id(target)) in self.seen:
                continue
            self.seen.add(("def", id(target)))
            for ret in (n for n in ast.walk(target) if isinstance(n, ast.Return) and n.value is not None):
                self.add_expr(ret.value, target, ret.lineno, depth + 1)
                self.items.append((depth + 1, ret))

    def _callee(self, call, scope):
        f = call.func
        name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)
        d = self.defs.get(name) if name else None
        if isinstance(d, ast.FunctionDef):
            return d
        if isinstance(d, ast.ClassDef):
            return None
        if isinstance(f, ast.Name):  # `net(x)` where `net = Net()` and Net is the program's own class
            for s in source.scope_statements(scope) + source.scope_statements(self.module):
                names, value = source.assigned(s)
                if f.id in names and isinstance(value, ast.Call):
                    cls = self.defs.get(source.dotted(value.func).split(".")[-1])
                    if isinstance(cls, ast.ClassDef):
                        for m in cls.body:
                            if isinstance(m, ast.FunctionDef) and m.name in ("forward", "__call__"):
                                return m
        return None


def _candidates(sl: _Slice) -> list[dict]:
    out = []
    for depth, item in sl.items:
        stmt = item if isinstance(item, ast.stmt) else None
        expr = source.assigned(item)[1] if stmt is not None and not isinstance(item, ast.Return) else (
            item.value if isinstance(item, ast.Return) else item)
        anchor = stmt if stmt is not None else item
        if stmt is not None:
            region = no_grad_region(stmt)
            if region is not None:
                out.append({"what": "no_grad", "depth": depth, "line": region.lineno, "inner": stmt.lineno,
                            "node": region, "expr": None, "order": 0})
        if expr is None:
            continue
        for order, n in enumerate(reversed(list(ast.walk(expr)))):
            cut = _cut_of(n)
            if cut is not None:
                out.append({"what": cut[0], "depth": depth, "line": getattr(n, "lineno", anchor.lineno),
                            "node": n, "expr": cut[1], "order": order, "stmt": stmt})
    return out


def _pick(cands: list[dict]) -> dict | None:
    """The cut nearest the graph's source: the deepest in the slice, the innermost in its statement."""
    if not cands:
        return None
    return max(cands, key=lambda c: (c["depth"], c["what"] != "compare", -c["line"], c["order"]))


def _numpy_funcs(sl: _Slice) -> list[str]:
    found = []
    for _, item in sl.items:
        for n in ast.walk(item):
            if isinstance(n, ast.Call):
                name = source.dotted(n.func)
                if name.startswith(("np.", "numpy.")) and name not in found:
                    found.append(name)
    return found


def static_cut(ev: Evidence, f: dict):
    file, line = f.get("file"), f.get("line")
    module = source.tree(file)
    stmt = source.statement_at(file, line)
    if module is None or stmt is None:
        return None, None
    sl = _Slice(file, module)
    scope = source.scope_of(stmt) or module
    for root in source.call_roots(stmt) or [stmt]:
        sl.add_expr(root, scope, stmt.lineno, 0, source.loop_of(stmt))
    return _pick(_candidates(sl)), sl


def root_label(f: dict) -> str:
    names = [n for r in f.get("roots") or [] for n in r.get("names") or []]
    return f"`{names[0]}`" if names else "the tensor given to backward()"


def static_fix(c: dict, file: str, sl: _Slice | None, root: str) -> tuple[str, str]:
    """(explanation sentence, fix) for a static cut."""
    what, line = c["what"], c["line"]
    code = source.code(file, line)
    expr = source.text(c["expr"]) if c.get("expr") is not None else ""
    if what == "no_grad":
        inner = c["inner"]
        return (f"Line {inner} (`{source.code(file, inner)}`) runs inside the no-grad block opened at line {line} "
                f"(`{code}`), so autograd recorded nothing for it and {root} has no graph.",
                f"Move the forward pass (line {inner}) out of the `{code.rstrip(':')}` block: keep no_grad only for "
                "evaluation, and run the pass you call backward() on with grad enabled.")
    if what == "detach":
        return (f"Line {line} (`{code}`) calls `.detach()` on `{expr}`, which returns a tensor with no grad_fn: "
                f"everything computed from it, {root} included, is cut off from the graph.",
                f"Drop the `.detach()` at line {line} (use `{expr}` itself); detach only values you log or use "
                "as fixed targets.")
    if what == "data":
        return (f"Line {line} (`{code}`) reads `{source.atom(expr)}.data`, a tensor outside autograd with no grad_fn, so "
                f"{root} is not connected to the parameters.",
                f"Use `{expr}` instead of `{source.atom(expr)}.data` at line {line}; `.data` bypasses autograd.")
    if what in ("item", "tolist", "float"):
        how = {"item": f"`{source.atom(expr)}.item()`", "tolist": f"`{source.atom(expr)}.tolist()`", "float": f"`float({expr})`"}[what]
        return (f"Line {line} (`{code}`) turns the tensor into Python numbers with {how}; a tensor built again "
                f"from them is a new leaf with no history, so {root} has no grad_fn.",
                f"Keep the computation in tensors: use `{expr}` itself where line {line} uses {how} (call "
                ".item() only for logging), e.g. `scaled = loss * 0.5`.")
    if what in ("numpy", "from_numpy"):
        funcs = [fn for fn in _numpy_funcs(sl) if fn.split(".")[-1] in _NUMPY_TO_TORCH] if sl else []
        alt = ", ".join(f"`{_NUMPY_TO_TORCH[fn.split('.')[-1]]}` for `{fn}`" for fn in funcs)
        return (f"Line {line} (`{code}`) takes the values out to NumPy; NumPy operations are not recorded, "
                f"and `torch.from_numpy` makes a new leaf with no grad_fn, so {root} has no graph.",
                "Do the post-processing with torch ops on the tensor instead of a NumPy round trip"
                + (f" ({alt})" if alt else "") + f", and drop the `.numpy()`/`torch.from_numpy` at line {line}.")
    if what == "rewrap":
        node = c["expr"]
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = ", ".join(source.text(e) for e in node.elts)
            better = f"`torch.stack([{parts}])` (or add them directly)"
        else:
            better = f"`{expr}` itself"
        return (f"Line {line} (`{code}`) builds a new tensor with `torch.tensor(...)`, which copies the values of "
                f"`{expr}` and drops their history: the result is a leaf with no grad_fn.",
                f"Replace `torch.tensor({expr})` at line {line} with {better}, so the result keeps its grad_fn.")
    if what.startswith("integer:"):
        op = what.split(":", 1)[1]
        return (f"Line {line} (`{code}`) calls `{op}`, which returns integer values; integers have no gradient, "
                f"so {root} computed from them has no grad_fn.",
                f"Compute the loss from the floating-point scores, not from `{op}` (e.g. "
                "`F.cross_entropy(logits, labels)`); keep argmax and accuracy for reporting under torch.no_grad().")
    if what == "compare":
        return (f"Line {line} (`{code}`) compares tensors (`{source.text(c['node'])}`), which gives a bool "
                f"tensor with no gradient, so {root} has no grad_fn.",
                "Use a differentiable loss of the scores instead of a comparison (e.g. `F.cross_entropy`), "
                "and compute accuracy only for reporting.")
    return (f"Line {line} (`{code}`) cut the graph.", f"Keep line {line} in torch ops that autograd records.")


def runtime_cut(ev: Evidence, f: dict) -> tuple[dict, str, str] | None:
    """Frozen parameters: ``requires_grad = False`` recorded before the failing backward."""
    events = ev.doc.get("events") or []
    bseq = max((e["seq"] for e in events if e.get("kind") == "backward" and e.get("line") == f.get("line")), default=None)
    before = [e for e in events if bseq is None or e["seq"] < bseq]
    frozen = [e for e in before if e.get("kind") == "requires_grad" and e.get("value") is False]
    root = root_label(f)
    if frozen:
        e = frozen[-1]
        lines = sorted({x["line"] for x in frozen})
        lib = f" (inside {e['library']})" if e.get("library") else ""
        code = source.code(e.get("file"), e.get("line"))
        return (e, f"Line {e['line']} (`{code}`){lib} set requires_grad=False on {len(frozen)} tensor(s)"
                   + (f" (lines {', '.join(map(str, lines))})" if len(lines) > 1 else "")
                   + f", and nothing else {root} depends on requires grad, so it has no grad_fn.",
                f"Keep requires_grad=True on the parameters you train: freeze only the part meant to stay fixed "
                f"at line {e['line']} (e.g. `for p in backbone.parameters(): p.requires_grad = False`), and make "
                "sure the new head is left trainable.")
    return None


# --- runtime provenance (see NOTE [Provenance of a missing graph]) -------------------------------

_REGION_MODES = ("no_grad", "inference_mode")


def _window(events: list, f: dict) -> tuple[list, list]:
    """(events since the last successful backward, all events) before the failing backward."""
    bk = [e for e in events if e.get("kind") == "backward"]
    failing = max((e["seq"] for e in bk if e.get("ok") is False), default=None)
    if failing is None:
        failing = max((e["seq"] for e in bk if e.get("line") == f.get("line")), default=None)
    before = [e for e in events if failing is None or e["seq"] < failing]
    start = max((e["seq"] for e in before if e.get("kind") == "backward" and e.get("ok")
                 and e.get("op") == "backward"), default=0)
    return [e for e in before if e["seq"] > start], before


def _cut_kind(e: dict) -> str | None:
    """What a recorded event cut, when it took a tensor that had a graph out of autograd."""
    kind, op = e.get("kind"), e.get("op")
    if kind == "alias" and op in ("detach", "data") and e.get("source_requires_grad"):
        return op
    if kind == "copy" and op in ("item", "tolist", "numpy") and e.get("source_requires_grad"):
        return op
    if kind == "copy" and e.get("source_requires_grad") and not e.get("requires_grad"):
        # recorded by the wrappers of ops with no grad_fn by nature (instrument/provenance.py)
        if op in _INTEGER_METHODS:
            return "integer:" + op
        if op in _COMPARISONS:
            return "compare"
    if kind == "create" and op in ("tensor", "as_tensor") and e.get("from_graph"):
        return "rewrap"
    if kind == "sample" and op == "sample" and e.get("params_require_grad"):
        return "sample"
    if kind == "backward" and op == "grad" and e.get("ok") and not e.get("create_graph"):
        return "grad"
    if kind == "backward" and op == "grad" and e.get("ok") and e.get("results_require_grad") is False:
        return "grad-no-graph"
    return None


# NOTE [A gradient without a graph]
# `torch.autograd.grad(..., create_graph=True)` records the backward pass so that its gradients can be
# differentiated again, but a gradient comes back without a graph where the backward formulas on its
# way record nothing: a custom Function whose backward is marked `@once_differentiable` (it runs under
# no_grad; torch raises its own error only when the incoming gradient itself required grad), or a
# gradient that is a constant (that of a linear function). A backward from such a gradient (a
# gradient penalty) then fails as `no-grad-fn`; the grad event records whether any result required
# grad, and the marked backward is read from the program's source to name the line to change.


def _leaves_torch(e: dict, window: list) -> bool:
    """The cut's value went out of torch (``.item()``/``.tolist()``/``.numpy()``, on the same line for a detach)."""
    if e.get("kind") == "copy" and e.get("leaves_autograd"):
        return True
    if e.get("kind") == "alias":
        return any(x.get("kind") == "copy" and x.get("leaves_autograd") and x.get("file") == e.get("file")
                   and x.get("line") == e.get("line") and x["seq"] > e["seq"] for x in window)
    return False


def _reenters(e: dict, window: list) -> bool:
    """A tensor was made again from Python or NumPy values after the cut (``torch.tensor``, ``from_numpy``)."""
    return any(x.get("kind") == "create" and x.get("op") in ("tensor", "as_tensor", "from_numpy")
               and x["seq"] > e["seq"] for x in window)


def _regions(window: list, before: list) -> list[dict]:
    """Grad-mode regions that switched autograd off: entered in the window, or a global switch still in force."""
    out = [e for e in window if e.get("kind") == "grad_mode" and e.get("mode") in _REGION_MODES
           and e.get("action") == "enter"]
    sets = [e for e in before if e.get("kind") == "grad_mode" and e.get("action") == "set"]
    if sets and sets[-1].get("enabled") is False:
        out.append(sets[-1])
    return sorted(out, key=lambda e: e["seq"])


def _exit_of(region: dict, window: list) -> dict | None:
    if region.get("action") != "enter":
        return None
    depth = 0
    for e in window:
        if e["seq"] <= region["seq"] or e.get("kind") != "grad_mode" or e.get("mode") != region.get("mode"):
            continue
        if e.get("action") == "enter":
            depth += 1
        elif e.get("action") == "exit":
            if depth == 0:
                return e
            depth -= 1
    return None


def _static_at(file: str | None, line: int | None, what: str) -> dict | None:
    """The construct on a recorded line, read from the source only to word the explanation and fix."""
    stmt = source.statement_at(file, line)
    if stmt is None:
        return None
    want = {"rewrap": ("rewrap", "from_numpy")}.get(what, (what,))
    for n in ast.walk(stmt):
        cut = _cut_of(n)
        if cut is not None and cut[0] in want:
            return {"what": cut[0], "line": line, "node": n, "expr": cut[1], "order": 0, "depth": 0, "stmt": stmt}
    return None


def where_event(e: dict, alias: str | None = None) -> dict:
    d = {"file": display_path(e.get("file")) if e.get("file") else None, "line": e.get("line"),
         "code": code_at(e.get("file"), e.get("line")), "alias": alias}
    return d


def _explain_cut(e: dict, what: str, window: list, root: str, marked=()) -> tuple[str, str]:
    file, line = e.get("file"), e.get("line")
    code = source.code(file, line)
    if what == "grad-no-graph":  # See NOTE [A gradient without a graph]
        text = (f"Line {line} (`{code}`) calls torch.autograd.grad with create_graph=True, but the gradients "
                f"it returned do not require grad, so {root} computed from them has no grad_fn.")
        if marked:
            node, mfile = marked[0]
            deco = next(d.lineno for d in node.decorator_list if "once_differentiable" in source.text(d))
            text += (f" The backward marked `@once_differentiable` at line {deco} ran without recording its "
                     "computation.")
            fix = (f"Remove `@once_differentiable` at line {deco} and compute that gradient with differentiable "
                   "torch ops (they are recorded under `create_graph=True`), or do not differentiate the "
                   "gradient: drop `create_graph=True` and the term built from it.")
        else:
            fix = ("The gradient does not depend on the inputs in a differentiable way (a linear function's "
                   "gradient is a constant, or a custom backward computed it without recording): its "
                   "derivative is zero or unknown; drop the term built from it, or compute the gradient with "
                   "differentiable torch ops.")
        return text, fix
    if what == "sample":
        dist = e.get("distribution") or "the distribution"
        text = (f"Line {line} (`{code}`) draws with `{dist}.sample()`, which is not differentiable: the draw has "
                f"no grad_fn although the distribution's parameters require grad, so {root} computed from it has "
                "no graph back to them.")
        if e.get("has_rsample"):
            fix = (f"Use `.rsample()` instead of `.sample()` at line {line}: the reparameterised draw keeps the "
                   "graph to the distribution's parameters.")
        else:
            fix = (f"`{dist}` has no rsample(): keep the draw from line {line} as a constant and train through "
                   "`dist.log_prob(sample)` (a score-function loss, e.g. `-(dist.log_prob(a) * reward).mean()`).")
        return text, fix
    if what == "grad":
        text = (f"Line {line} (`{code}`) calls torch.autograd.grad without create_graph=True: the gradients it "
                f"returns have no graph of their own, so {root} computed from them (a gradient penalty) has no "
                "grad_fn.")
        fix = (f"Pass `create_graph=True` to torch.autograd.grad at line {line} so the gradients stay "
               "differentiable (retain_graph follows it).")
        return text, fix
    c = _static_at(file, line, what)
    if c is not None:
        return static_fix(c, file, None, root)
    label = {"detach": "`.detach()`", "data": "`.data`", "item": "`.item()`", "tolist": "`.tolist()`",
             "numpy": "`.numpy()`", "rewrap": "`torch.tensor(...)`"}.get(what, what)
    return (f"Line {line} (`{code}`) took a tensor that requires grad out of autograd with {label}; {root} was "
            "computed from the result and has no grad_fn.",
            f"Keep the computation connected to the graph at line {line}: drop the {label}.")


def _explain_region(e: dict, window: list, root: str) -> tuple[str, str, dict]:
    file, line = e.get("file"), e.get("line")
    code = source.code(file, line)
    exit_ = _exit_of(e, window)
    region = {"mode": e.get("mode"), "file": display_path(file) if file else None, "line": line,
              "decorator": bool(e.get("decorator")), "function": e.get("function"),
              "exit_line": exit_.get("line") if exit_ else None,
              "events_inside": sum(1 for x in window if e["seq"] < x["seq"] < (exit_ or {"seq": 1 << 62})["seq"])}
    if e.get("action") == "set":
        return (f"Line {line} (`{code}`) switched grad mode off, and it was still off when {root} was computed, "
                "so autograd recorded no graph.",
                f"Remove `{code}` at line {line} (or re-enable with `torch.set_grad_enabled(True)`) before the "
                "forward pass you call backward() on.", region)
    mode = "torch.inference_mode" if e.get("mode") == "inference_mode" else "torch.no_grad"
    if e.get("decorator"):
        fn = e.get("function") or "the function"
        return (f"`{fn}` is decorated with `{code}` (line {line}), so everything it computes runs without "
                f"autograd; {root} was computed from what `{fn}` returned and has no grad_fn.",
                f"Remove the `{code}` decorator at line {line} from `{fn}` (keep no_grad at the evaluation "
                "call sites instead), so the pass you call backward() on is recorded.", region)
    return (f"{root} was computed in the `{mode}()` block entered at line {line} (`{code}`)"
            + (f" in `{e['function']}`" if e.get("function") else "")
            + ", where autograd records nothing, so it has no graph.",
            f"Move the computation you call backward() on out of the `{code.rstrip(':')}` block at line {line} "
            "(keep no_grad only for evaluation), or run it with grad enabled.", region)


def _weak(what: str) -> bool:
    return what.startswith("integer:") or what == "compare"


def recorded_cut(ev: Evidence, f: dict) -> dict | None:
    """The recorded cut of the failing root's graph: {event, what, text, fix, provenance}."""
    events = ev.doc.get("events") or []
    window, before = _window(events, f)
    root = root_label(f)
    cuts = [(e, _cut_kind(e)) for e in window]
    cuts = [(e, what) for e, what in cuts if what is not None]
    # a value taken out to Python or NumPy is on the root's way only if the program made a tensor of
    # such values again afterwards; otherwise it was logged (`loss.item()`, `x.detach().numpy()` to plot)
    kept = [(e, what) for e, what in cuts if not _leaves_torch(e, window)]
    kept += [(e, what) for e, what in cuts if _leaves_torch(e, window) and _reenters(e, window)]
    # an argmax or a comparison is as often a metric computed beside the loss as the cut itself: it
    # decides only when nothing else (a detach, a no-grad region, frozen parameters) was recorded
    weak = [(e, what) for e, what in kept if _weak(what)]
    kept = [(e, what) for e, what in kept if not _weak(what)]
    if not kept and weak and not _regions(window, before) and not any(
            e.get("kind") == "requires_grad" and e.get("value") is False for e in before):
        kept = weak
    if kept:
        e, what = min(kept, key=lambda c: c[0]["seq"])
        marked = once_differentiable_backwards(ev) if what == "grad-no-graph" else ()
        text, fix = _explain_cut(e, what, window, root, marked)
        return {"event": e, "what": what, "text": text, "fix": fix,
                "provenance": {"cut": what.split(":", 1)[0], "event": e["seq"], "region": None,
                               "window": [window[0]["seq"], window[-1]["seq"]] if window else None}}
    if any(e.get("kind") == "requires_grad" and e.get("value") is False for e in before):
        return None  # frozen parameters: _runtime words it
    regions = _regions(window, before)
    if regions:
        # the region nearest the backward: one entered earlier in the step is typically a target or
        # teacher computed without grad on purpose
        e = regions[-1]
        text, fix, region = _explain_region(e, window, root)
        return {"event": e, "what": "no_grad", "text": text, "fix": fix,
                "provenance": {"cut": "grad_mode", "event": e["seq"], "region": region,
                               "window": [window[0]["seq"], window[-1]["seq"]] if window else None}}
    return None
