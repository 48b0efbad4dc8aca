"""What a fix proposes: the out-of-place form of an in-place write, a clone, and whether an expression
may be assigned to (torch-free; tests/test_fixes.py checks the op tables against torch)."""

from __future__ import annotations

import ast

from tensorscope import source

# In-place Tensor methods with no out-of-place method of the same name minus the underscore
# (checked against torch in tests/test_fixes.py); a fix never proposes `x.zero(...)`.
NO_OUT_OF_PLACE = frozenset({
    "zero_", "fill_", "uniform_", "normal_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_",
    "copy_", "set_", "share_memory_", "fill_diagonal_", "map_", "apply_", "map2_", "resize_as_sparse_",
    "sparse_resize_", "sparse_resize_and_clear_",
    # these have a namesake without the underscore that is not their out-of-place form
    "resize_", "resize_as_", "requires_grad_",
})
# ... and what to write instead, as an expression over the receiver X and the call's arguments.
_REPLACEMENT = {"zero_": "torch.zeros_like({x})", "fill_": "torch.full_like({x}, {args})"}


def out_of_place(op: str) -> str:
    """``mul_`` -> ``mul``; ``iadd`` -> ``+``; an op with no out-of-place method is returned unchanged."""
    if op.endswith("_") and not op.startswith("_") and op not in NO_OUT_OF_PLACE:
        return op[:-1]
    return {"iadd": "+", "isub": "-", "imul": "*", "itruediv": "/", "ipow": "**"}.get(op, op)


def has_out_of_place(op: str) -> bool:
    """Whether ``X.op(...)`` has an out-of-place method ``X.op_without_underscore(...)``."""
    return op.endswith("_") and not op.startswith("_") and op not in NO_OUT_OF_PLACE


def out_of_place_expr(op: str, receiver: str, args: str) -> str | None:
    """The out-of-place expression for ``receiver.op(args)``, or None when there is none to propose."""
    if op in _REPLACEMENT:
        if op == "fill_" and not args:
            return None
        return _REPLACEMENT[op].format(x=receiver, args=args)
    if has_out_of_place(op):
        return f"{receiver}.{op[:-1]}({args})"
    return None


def assignable(expr: str | None) -> bool:
    """Whether ``expr`` (source text) may stand left of ``=``: a name, an attribute or a subscript.

    A call (`trainer.run()`), a label such as "the tensor" or an empty string never is, so a fix never
    proposes `trainer.run() = ...`.
    """
    if not expr:
        return False
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return False
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return False
    while isinstance(node, (ast.Attribute, ast.Subscript)):  # `self.w`, `x[0]`, `a.b[1].c`; not `f(x).y`
        node = node.value
    return isinstance(node, ast.Name)


_BINOPS = {"Sub": "-", "Add": "+", "Mult": "*", "Div": "/", "Pow": "**", "FloorDiv": "//", "MatMult": "@",
           "BitAnd": "&", "BitOr": "|", "BitXor": "^", "Mod": "%", "LShift": "<<", "RShift": ">>"}


def rewrite_out_of_place(code: str) -> str | None:
    """The out-of-place form of a quoted in-place statement, built from its AST, or None.

    ``w -= lr * g`` -> ``w = w - lr * g``; ``x.mul_(2)`` -> ``x = x.mul(2)``; ``h.zero_()`` ->
    ``h = torch.zeros_like(h)``. Only a target that may stand left of ``=`` (a name, an attribute,
    a subscript) is rewritten, and only to an op that exists.
    """
    try:
        body = ast.parse(code.strip()).body
    except (SyntaxError, ValueError):
        return None
    if len(body) != 1:
        return None
    node = body[0]
    if isinstance(node, ast.AugAssign) and type(node.op).__name__ in _BINOPS:
        t = source.text(node.target)
        if assignable(t):
            op, value = _BINOPS[type(node.op).__name__], source.text(node.value)
            bare, wrapped = f"{t} = {t} {op} {value}", f"{t} = {t} {op} ({value})"
            # parentheses only where precedence needs them: `w = w - lr * g`, `x = x * (a + b)`
            return bare if ast.dump(ast.parse(bare)) == ast.dump(ast.parse(wrapped)) else wrapped
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
        call = node.value
        args = ", ".join([source.text(a) for a in call.args]
                         + [f"{k.arg}={source.text(k.value)}" if k.arg else f"**{source.text(k.value)}"
                            for k in call.keywords])
        recv = source.text(call.func.value)
        expr = out_of_place_expr(call.func.attr, source.atom(recv), args)
        if expr is not None and assignable(recv):
            return f"{recv} = {expr}"
    return None


def clone_of(alias: str | None) -> str:
    """A fix fragment that clones ``alias``: code when it can be assigned to, words otherwise."""
    if assignable(alias):
        return f"`{alias} = {alias}.clone()`"
    return "a clone of the tensor (`.clone()`) in place of the original"


def rewrite_or_clone(segment: str, op: str, alias: str) -> str:
    """The out-of-place form of an in-place statement (``w -= lr * g`` -> ``w = w - lr * g``), else a clone."""
    rewritten = rewrite_out_of_place(segment)
    if rewritten:
        return rewritten
    if assignable(alias):
        return f"{alias} = {alias}.clone()  # then write into the clone"
    return "x = x.clone()  # x: the tensor written; then write into the clone"
