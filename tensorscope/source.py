"""Reading the user's source: quoting a line, the path a report shows, and statements, scopes, loops and
assignments with ``ast`` (torch-free; the report, the kinds and the renderers all quote through here)."""

from __future__ import annotations

import ast
import io
import linecache
import os
import tokenize

_trees: dict = {}


def code_at(file: str | None, line: int | None) -> str:
    """The source of a line as the report quotes it: stripped, without a trailing comment."""
    if not file or not line:
        return ""
    return without_comment(linecache.getline(file, line).strip())


def without_comment(text: str) -> str:
    if "#" not in text:
        return text
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                return text[:tok.start[1]].rstrip() or text
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement
        pass
    return text


_DISPLAY: dict = {}  # (file, working directory) -> shown path: a report names few files, many times


def display_path(file: str | None) -> str | None:
    if not file:
        return file
    key = (file, os.getcwd())
    shown = _DISPLAY.get(key)
    if shown is None:
        try:
            rel = os.path.relpath(file, key[1])
        except ValueError:
            rel = ".."
        if len(_DISPLAY) > 4096:  # a long-lived process (the API, the pytest plugin)
            _DISPLAY.clear()
        shown = _DISPLAY[key] = file if rel.startswith("..") else rel
    return shown


def tree(file: str | None) -> ast.Module | None:
    """The parsed module of ``file`` (cached), or None when it cannot be read or parsed."""
    if not file:
        return None
    if file in _trees:
        return _trees[file]
    text = "".join(linecache.getlines(file))
    try:
        t = ast.parse(text) if text else None
    except (SyntaxError, ValueError):
        t = None
    if t is not None:
        for parent in ast.walk(t):
            for child in ast.iter_child_nodes(parent):
                child._ts_parent = parent  # type: ignore[attr-defined]
    _trees[file] = t
    return t


def parent(node):
    return getattr(node, "_ts_parent", None)


def ancestors(node):
    p = parent(node)
    while p is not None:
        yield p
        p = parent(p)


def statement_at(file: str | None, line: int | None) -> ast.stmt | None:
    """The innermost statement that starts at, or spans, ``line``."""
    t = tree(file)
    if t is None or not line:
        return None
    best = None
    for node in ast.walk(t):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or (node.lineno, -(node.end_lineno or 0)) >= (best.lineno, -(best.end_lineno or 0)):
                best = node
    return best


def scope_of(node) -> ast.AST | None:
    """The function (or module) whose body holds ``node``."""
    for a in ancestors(node):
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module, ast.Lambda)):
            return a
    return None


def loop_of(node) -> ast.AST | None:
    """The innermost ``for``/``while`` loop around ``node`` inside its scope."""
    for a in ancestors(node):
        if isinstance(a, (ast.For, ast.AsyncFor, ast.While)):
            return a
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module, ast.ClassDef)):
            return None
    return None


def scope_statements(scope) -> list[ast.stmt]:
    """Every statement of a scope, in source order, without entering nested functions or classes."""
    out = []

    def visit(stmts):
        for s in stmts:
            out.append(s)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(s, field, []) or [])
            for h in getattr(s, "handlers", []) or []:
                visit(h.body)
            for c in getattr(s, "cases", []) or []:
                visit(c.body)

    visit(getattr(scope, "body", []) if not isinstance(scope, ast.Lambda) else [])
    return out


def target_names(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in target_names(e)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def assigned(stmt) -> tuple[list[str], ast.AST | None]:
    """Names a statement binds and the expression they come from."""
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in target_names(t)], stmt.value
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return target_names(stmt.target), stmt.value
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return target_names(stmt.target), stmt.iter
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        names = [n for item in stmt.items if item.optional_vars is not None for n in target_names(item.optional_vars)]
        return names, None
    return [], None


def reads(expr) -> list[str]:
    """Names read by an expression, in order, each once."""
    out = []
    if expr is None:
        return out
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in out:
            out.append(n.id)
    return out


def self_updates(stmts) -> list[tuple[str, ast.stmt]]:
    """``x = f(x, ...)`` and ``x += ...`` statements: names carried from one iteration to the next."""
    out = []
    for s in stmts:
        names, value = assigned(s)
        if isinstance(s, ast.AugAssign):
            out.extend((n, s) for n in names)
        elif isinstance(s, ast.Assign):
            r = reads(value)
            out.extend((n, s) for n in names if n in r)
    return out


def carried_names(loop) -> set[str]:
    """Names a loop's body reads before it surely binds them: the state one iteration hands the next
    (``hidden`` in ``output, hidden = model(data, hidden)``), not a value each iteration makes first and
    then updates (``output = output.view(...)`` after ``output = model(data)``). A name bound on only one
    branch of an ``if`` is not surely bound after it."""
    found: set[str] = set()

    def load(node, bound):
        if node is None:
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
                found.add(n.id)

    def block(stmts, bound: set) -> set:
        bound = set(bound)
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(st.name)
            elif isinstance(st, ast.If):
                load(st.test, bound)
                bound |= block(st.body, bound) & block(st.orelse, bound)
            elif isinstance(st, (ast.For, ast.AsyncFor, ast.While)):
                load(getattr(st, "iter", None) or getattr(st, "test", None), bound)
                block(st.body, bound | set(target_names(st.target)) if hasattr(st, "target") else bound)
                block(st.orelse, bound)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    load(item.context_expr, bound)
                names, _ = assigned(st)
                bound = block(st.body, bound | set(names))
            elif isinstance(st, ast.Try):
                after = block(st.body, bound)
                for h in st.handlers:
                    block(h.body, bound)
                bound = block(st.finalbody, block(st.orelse, after))
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                load(st.value, bound)
                if isinstance(st, ast.AugAssign):
                    load(ast.Name(id=st.target.id, ctx=ast.Load()) if isinstance(st.target, ast.Name) else st.target, bound)
                for t in (st.targets if isinstance(st, ast.Assign) else [st.target]):
                    if not isinstance(t, (ast.Name, ast.Tuple, ast.List, ast.Starred)):
                        load(t, bound)  # `cache[k] = v` reads `cache`
                names, _ = assigned(st)
                bound |= set(names)
            else:
                load(st, bound)
        return bound

    body = getattr(loop, "body", None) or []
    block(body, set(target_names(loop.target)) if hasattr(loop, "target") else set())
    return found


def dotted(expr) -> str:
    """``torch.nn.functional.relu`` for an attribute chain, '' otherwise."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return ""


def text(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return ""


def call_roots(stmt, method: str = "backward") -> list[ast.AST]:
    """The tensors a statement runs backward from: ``loss`` in ``loss.backward()``, the first argument of
    ``torch.autograd.backward(...)``/``torch.autograd.grad(...)``."""
    out = []
    for n in ast.walk(stmt):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == method and not dotted(f).startswith(("torch.", "autograd.")):
            out.append(f.value)
        elif dotted(f) in ("torch.autograd.backward", "autograd.backward", "torch.autograd.grad", "autograd.grad"):
            if n.args:
                out.append(n.args[0])
            else:
                out.extend(k.value for k in n.keywords if k.arg in ("tensors", "outputs"))
    return out


def code(file: str | None, line: int | None) -> str:
    """The source of a line for quoting in sentences: as :func:`code_at`, and '' for a line that is all comment."""
    raw = code_at(file, line)
    return "" if raw.startswith("#") else raw


def definition(file: str | None, line: int | None, name: str | None) -> ast.stmt | None:
    """The last statement before ``line``, in the same scope, that binds ``name``."""
    stmt = statement_at(file, line)
    if stmt is None or not name:
        return None
    scope = scope_of(stmt) or tree(file)
    found = None
    for s in scope_statements(scope):
        if s.lineno < stmt.lineno and name in assigned(s)[0]:
            found = s
    return found


def bound_name(file: str | None, line: int | None) -> str | None:
    """The single name a line assigns (``w = torch.tensor(...)`` -> ``w``)."""
    stmt = statement_at(file, line)
    names = assigned(stmt)[0] if stmt is not None else []
    return names[0] if len(names) == 1 else None


def atom(expr: str | None) -> str:
    """``expr`` ready for a method call: ``w * 3`` -> ``(w * 3)``, ``model(x)`` unchanged."""
    if not expr:
        return expr or ""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return f"({expr})"
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)):
        return expr.strip()
    return f"({expr.strip()})"


def forget(file: str) -> None:
    """Drop the parsed module of ``file``: its text changed (a saved report's recorded source)."""
    _trees.pop(file, None)
