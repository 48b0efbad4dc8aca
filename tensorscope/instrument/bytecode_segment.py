"""The source of the call a frame is executing, where the code has no column positions (Python 3.10).

NOTE [The executing call from bytecode and the line's syntax tree]
From Python 3.11 ``code.co_positions()`` gives the columns of every instruction, so the text of the
call being executed (``tmp.mul_(2)`` inside a longer line) is sliced straight out of the line. 3.10
has no columns, but its syntax tree has them (``col_offset``/``end_col_offset`` on every node), so
the instruction at ``f_lasti`` is matched to a node of the statement on its line:

- a call (``CALL_METHOD``, ``CALL_FUNCTION``, ``CALL_FUNCTION_KW``, ``CALL_FUNCTION_EX``): walking
  back from the call over the instructions that pushed its arguments (their stack effects sum to
  the argument count), the instruction before them loaded the callable: ``LOAD_METHOD mul_`` or
  ``LOAD_ATTR mul_`` gives the name, ``LOAD_NAME``/``LOAD_GLOBAL``/``LOAD_FAST``/``LOAD_DEREF`` a
  plain function's. Where the receiver was loaded by a plain chain (``LOAD_FAST self``,
  ``LOAD_ATTR h``) its text is rebuilt (``self.h``). The candidates are the statement's calls of
  that name (and that receiver, when known; else those whose receiver is not a plain chain);
- an augmented assignment (``INPLACE_ADD`` ...): the statement's ``+=`` of that operator;
- a subscript store (``STORE_SUBSCR``): the statement's subscript target.

Exactly one candidate gives its text, as ``co_positions`` gives it on 3.11 (``x.add_(1).mul_(2)``,
``x += 1``, ``x[0]``). Anything else, a jump among the arguments (``f(a if c else b)``), two calls
alike on one statement (``a.mul_(2); a.mul_(3)``), a source that does not parse, gives None: no
alias is named rather than a wrong one. The candidates are the nodes on the instruction's line of
every statement spanning it (``a.mul_(1); a.mul_(2)`` is two statements, so ambiguous), each
without its nested statements (a compound statement's body is its own statement); nodes inside a
lambda or comprehension are candidates only for that lambda's or comprehension's own code.
"""

from __future__ import annotations

import ast
import dis
import linecache

_CALLS = {"CALL_METHOD": 0, "CALL_FUNCTION": 0, "CALL_FUNCTION_KW": 1}  # extra items above the arguments
_NAME_LOADS = {"LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF"}
_LOADERS = _NAME_LOADS | {"LOAD_METHOD", "LOAD_ATTR"}
_INPLACE = {
    "INPLACE_ADD": ast.Add, "INPLACE_SUBTRACT": ast.Sub, "INPLACE_MULTIPLY": ast.Mult,
    "INPLACE_TRUE_DIVIDE": ast.Div, "INPLACE_FLOOR_DIVIDE": ast.FloorDiv, "INPLACE_MODULO": ast.Mod,
    "INPLACE_POWER": ast.Pow, "INPLACE_MATRIX_MULTIPLY": ast.MatMult, "INPLACE_LSHIFT": ast.LShift,
    "INPLACE_RSHIFT": ast.RShift, "INPLACE_AND": ast.BitAnd, "INPLACE_OR": ast.BitOr, "INPLACE_XOR": ast.BitXor,
}
_NESTED_CODE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

_CODES: dict = {}  # id(code) -> (code, [(instruction, line)] indexed by offset // 2)
_TREES: dict = {}  # filename -> (linecache's lines list, (source, {line: [every statement on it]}))


def segment(code, lasti: int) -> str | None:
    """The source text of the call, ``+=`` or subscript store at instruction ``lasti`` of ``code``."""
    try:
        return _segment(code, lasti)
    except Exception:  # an odd code object or source: no segment, never an error
        return None


def _segment(code, lasti):
    instrs = _instructions(code)
    i = lasti // 2
    if not 0 <= i < len(instrs) or instrs[i] is None:
        return None
    ins, line = instrs[i]
    found = _tree(code.co_filename)
    if found is None or line is None:
        return None
    source, statements = found
    nodes = [n for stmt in statements.get(line, ()) for n in _own_nodes(stmt, code.co_name)
             if getattr(n, "lineno", None) is not None and n.lineno <= line <= (n.end_lineno or n.lineno)]
    op = ins.opname
    if op in _CALLS or op == "CALL_FUNCTION_EX":
        name, recv = _callee(instrs, i)
        if name is None:
            return None
        cands = [n for n in nodes if isinstance(n, ast.Call) and _name(n.func) == name]
        if recv is not None:
            cands = [n for n in cands if isinstance(n.func, ast.Attribute) and _text(n.func.value) == recv]
        elif len(cands) > 1:
            cands = [n for n in cands if isinstance(n.func, ast.Attribute) and not _plain_chain(n.func.value)]
    elif op in _INPLACE:
        cands = [n for n in nodes if isinstance(n, ast.AugAssign) and isinstance(n.op, _INPLACE[op])]
    elif op == "STORE_SUBSCR":
        cands = [n for n in nodes if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)]
    else:
        return None
    if len(cands) != 1:
        return None
    return ast.get_source_segment(source, cands[0])


def _instructions(code):
    entry = _CODES.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    out = [None] * (len(code.co_code) // 2)
    line = None
    for ins in dis.get_instructions(code):
        if ins.starts_line is not None:
            line = ins.starts_line
        out[ins.offset // 2] = (ins, line)
    if len(_CODES) >= 4096:
        _CODES.clear()
    _CODES[id(code)] = (code, out)
    return out


def _callee(instrs, i):
    """(name, receiver text or None) of the callable of the call at index ``i``; (None, None) if unsure."""
    ins = instrs[i][0]
    if ins.opname == "CALL_FUNCTION_EX":
        need = 1 + (ins.arg & 1)
    else:
        need = ins.arg + _CALLS[ins.opname]
    total = 0
    k = i - 1
    while k >= 0:
        entry = instrs[k]
        if entry is None:
            k -= 1
            continue
        prev = entry[0]
        if total == need and prev.opname in _LOADERS:
            break
        if prev.is_jump_target or "JUMP" in prev.opname or prev.opname.startswith(("FOR_ITER", "SETUP")):
            return None, None
        total += dis.stack_effect(prev.opcode, prev.arg if prev.opcode >= dis.HAVE_ARGUMENT else None, jump=False)
        if total > need:
            return None, None
        k -= 1
    else:
        return None, None
    loader = instrs[k][0]
    if loader.is_jump_target:
        return None, None
    if loader.opname in _NAME_LOADS:
        return loader.argval, None
    return loader.argval, _chain_before(instrs, k)


def _chain_before(instrs, k):
    """The text of a receiver loaded by a plain chain (``self.h``) just before instruction ``k``."""
    parts = []
    j = k - 1
    while j >= 0:
        if instrs[j] is None:  # an EXTENDED_ARG's slot
            j -= 1
            continue
        ins = instrs[j][0]
        if ins.opname == "LOAD_ATTR":
            parts.append(ins.argval)
        elif ins.opname in _NAME_LOADS:
            parts.append(ins.argval)
            return ".".join(reversed(parts))
        else:
            return None
        if ins.is_jump_target:
            return None
        j -= 1
    return None


def _name(func) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _plain_chain(node) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _text(node) -> str | None:
    try:
        return ast.unparse(node)
    except Exception:
        return None


def _own_nodes(stmt, co_name: str) -> list:
    """The expression nodes of ``stmt`` that code named ``co_name`` runs: not those of nested
    statements; inside a lambda or comprehension only for that code, else outside them."""
    nested = co_name in ("<lambda>", "<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>")
    out = [] if nested else [stmt]

    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue
            now = inside or isinstance(child, _NESTED_CODE)
            if now == nested:
                out.append(child)
            walk(child, now)

    walk(stmt, False)
    return out


def _tree(filename: str):
    """(source, {line: [every statement that spans it]}) of a file linecache can read, or None."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    entry = _TREES.get(filename)
    if entry is not None and entry[0] is lines:
        return entry[1]
    source = "".join(lines)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        found = None
    else:
        statements: dict = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    statements.setdefault(ln, []).append(node)
        found = (source, statements)
    if len(_TREES) >= 256:
        _TREES.clear()
    _TREES[filename] = (lines, found)
    return found
