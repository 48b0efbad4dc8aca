"""Finding the user's line behind an event, cheaply.

Every tensor op of the program can pass through the instrumentation, so these
helpers are on the hot path: a frame walk comparing ``co_filename`` against a
cached verdict costs well under a microsecond (see NOTE [Hot path] in
``patches.py``).
"""

from __future__ import annotations

import array
import ast
import bisect
import linecache
import os
import sys

from tensorscope.instrument import bytecode_segment
from tensorscope.usercode import COMPILER, UserCode  # noqa: F401  (the program's files: torch-free, kinds read them too)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_tensorscope_file(filename: str) -> bool:
    """True for tensorscope's own source files (hidden from tracebacks)."""
    return filename.startswith(_PACKAGE_DIR)


SIGNALS_WAIT: set = set()  # code objects of tensorscope's callbacks that C code calls between the program's instructions
SIGNALS_RUN: set = set()  # code objects of tensorscope's wrappers that wait in a system call for the program


def signals_run(fn):
    """Mark ``fn`` as a wrapper that waits in a system call on the program's behalf (``os.waitpid``): a signal
    handler of the program's that lands in it runs there at once, as python runs it in the call it wraps (NOTE
    [A signal handler that lands in tensorscope's code] in exits.py). Returns ``fn``."""
    SIGNALS_RUN.add(fn.__code__)
    return fn


def signals_wait(fn):
    """Mark ``fn`` as a callback that C code calls between two instructions of the program (a weak reference
    callback, whose exception CPython prints as "Exception ignored" and drops; a ``sys.monitoring`` or trace
    callback): a signal handler that would run inside it runs once it has returned, in the program's code (NOTE
    [A signal handler that lands in a callback of tensorscope's] in exits.py). Returns ``fn``."""
    SIGNALS_WAIT.add(fn.__code__)
    return fn


def strip_traceback(e: BaseException) -> None:
    """Remove tensorscope's frames from an exception's traceback (see NOTE [Invisible frames] in patches.py)."""
    tb = e.__traceback__
    while tb is not None and is_tensorscope_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    _unlink(tb)
    e.__traceback__ = tb


def _unlink(tb) -> None:
    """Unlink tensorscope's entries that follow ``tb`` in a traceback chain."""
    while tb is not None:
        nxt = tb.tb_next
        while nxt is not None and is_tensorscope_file(nxt.tb_frame.f_code.co_filename):
            nxt = nxt.tb_next
        tb.tb_next = nxt
        tb = nxt


# NOTE [Locals of a running frame]
# Before Python 3.13 (PEP 667), reading ``f_locals`` of a running function frame copies its fast locals
# into a dict that the frame keeps (the one ``locals()`` returns) until it returns: every local of that
# moment stays alive after the function deletes or rebinds it (a training step's batch, its graph), and a
# ``weakref`` to it shows that. So tensorscope never keeps that dict: ``peek_locals`` copies it and
# empties it again at once, when nothing but the frame holds it (``sys.getrefcount``: the frame, the
# local name and the call's argument); the next ``locals()`` of the program fills it again, as it
# always does. Left alone: a dict the program holds (it kept ``locals()``; a debugger's namespace),
# which the read refreshed as the program's own ``locals()`` would, and a frame with a Python trace
# function (``f_trace``), whose callback copies that dict back into the frame's variables on return.
# From 3.13 ``f_locals`` is a view over the frame (nothing kept) and is read as it is.
_SNAPSHOT_LOCALS = sys.version_info < (3, 13)
_CO_OPTIMIZED = 0x0001


def peek_locals(frame) -> dict:
    """A copy of ``frame``'s local names, leaving no snapshot on a running function frame (NOTE [Locals of a
    running frame]). The caller drops the copy after its read."""
    d = frame.f_locals
    copy = dict(d)
    if _SNAPSHOT_LOCALS and frame.f_code.co_flags & _CO_OPTIMIZED and type(d) is dict \
            and d is not frame.f_globals and frame.f_trace is None and sys.getrefcount(d) <= 3:
        d.clear()
    return copy


# NOTE [A bare raise on Python 3.10]
# A wrapper lets a program's exception through with ``strip_traceback(e); raise``. From Python 3.11
# the bare ``raise`` re-raises ``e`` with its (stripped) ``__traceback__`` and adds no entry for the
# wrapper's frame. On 3.10 it restores the traceback its ``except`` clause caught, whose first entry
# is the wrapper's own frame; and any other way out of a frame (``raise e``) adds an entry for it.
# So the wrapper's entry cannot be kept out; it is taken out one frame up instead: the first
# program frame the exception reaches (the wrapper's caller) gets a one-shot local trace function,
# armed with ``sys.settrace`` of a global function that traces nothing. At the exception event in
# that frame, which CPython delivers right after adding the frame's own entry and before any
# ``except`` of it runs, the local function unlinks tensorscope's entries below it and removes
# itself and the global function; any other first event (an exception swallowed by C code in
# between) removes them too. The program's view: ``sys.gettrace()`` is None again before its next
# line runs; where the program has a tracer of its own (a debugger, coverage), nothing is armed and
# the one entry stays. A program's audit hook sees the two ``sys.settrace`` audit events, and an
# exception swallowed by C code between the wrapper and that frame leaves ``sys.gettrace()`` set
# until the frame's next line. ``RERAISE_KEEPS_CAUGHT_TRACEBACK`` is measured at import, not read
# from the version.
def _reraise_keeps_caught_traceback() -> bool:
    def reraise():
        try:
            raise ValueError
        except ValueError as e:
            e.__traceback__ = None
            raise

    try:
        reraise()
    except ValueError as e:
        return e.__traceback__ is not None and e.__traceback__.tb_next is not None
    return False


RERAISE_KEEPS_CAUGHT_TRACEBACK = _reraise_keeps_caught_traceback()


def _trace_nothing(frame, event, arg):
    return None


def _unlink_on_arrival(frame, event, arg):
    frame.f_trace = None
    if sys.gettrace() is _trace_nothing:
        sys.settrace(None)
    if event == "exception":
        _unlink(arg[2])
    return None


def strip_for_reraise(e: BaseException) -> None:
    """``strip_traceback(e)`` in a wrapper's ``except`` clause, before its bare ``raise``; on Python
    3.10 the wrapper's own entry is then unlinked in the caller (NOTE [A bare raise on Python 3.10])."""
    strip_traceback(e)
    if not RERAISE_KEEPS_CAUGHT_TRACEBACK or sys.gettrace() is not None:
        return
    try:
        f = sys._getframe(2)
        while f is not None and is_tensorscope_file(f.f_code.co_filename):
            f = f.f_back
        if f is None or f.f_trace is not None:
            return
        f.f_trace = _unlink_on_arrival
        sys.settrace(_trace_nothing)
    except Exception:  # never break the program's exception for a cosmetic fix
        pass


# NOTE [Line numbers of running frames]
# ``frame.f_lineno`` decodes the code object's line table from its start up to the current
# instruction at every read: 0.1 us at the top of a function, 5.7 us 300 lines into one (measured on
# Python 3.11). A training loop at the top level of a long script (nanoGPT's train.py) is exactly
# that, and every in-place write of its optimizer reads the line of that frame twice. The line is a
# function of (code object, instruction offset), so it is cached by that pair: keyed by the code
# object's id (hashing a code object hashes its whole bytecode and constants, and equal code objects
# of two runs of one script compare member by member), the entry holding the code object itself so
# that the id cannot be reused meanwhile. A long code object (a generated script of 20,000 lines
# at the top level, each line run once: every read a miss) gets its line table decoded once
# (``co_lines``) and searched by offset: a miss there costs a binary search, not a walk from the top.
# Its ranges come one per instruction or two (co_lines gives 199,986 for the 20,000 lines), and those of one
# line in a row are kept as one range (20,000 there: 0.2 MB, not 1.7). Its lines are still cached by offset:
# the write path reads ``_LINES`` inline, and a miss there costs 0.5 us more a read (a loop at the top of a
# long script, measured on 3.11). These caches are emptied when the program ends (``release_caches``).
#
# NOTE [Line cache entries: the line as the value, the code held apart]
# An entry of ``_LINES`` is ``(id(code), offset) -> line``. It held ``(code, line)``, so that a freed code's id
# taken by a new code could not give the new one a stale line: that value tuple, and each key's own int of
# the id, were ~90 of the entry's ~230 bytes (17,498 entries, 4.1 MB deep at a generated script's program
# end, its peak memory: benchmarks/RESULTS.md, "mem19"). ``_LINE_CODES`` (id -> (code, the id's int)) now
# holds every code that has entries, once, so no other code can take its id while they exist, and the keys
# of one code share its id's int. The two are emptied together, ``_LINE_CODES`` first; ``line_of``
# registers the code, then writes the line, then drops the line again if the code was let go meanwhile (a
# clear by another thread between the two), so that no entry outlives the hold on its code. Readers on the
# hot path (tracker, recorder, optimizer_steps, foreach_writes) read ``_LINES.get((id(code), f_lasti))``
# inline and call ``line_of`` on None: ~210 fewer instructions a read than checking the entry's code
# (callgrind, Python 3.11). An int key (``id(code) << 32 | offset``) would save 40 bytes more an entry but
# costs ~35 instructions more a read than the old form (its ints have three digits): not taken.
_LINES: dict = {}
_LINE_CODES: dict = {}  # id(code) -> (code, that id's int), for every code with entries in _LINES
_TABLES: dict = {}  # id(code) -> (code, start offsets or None for a short code, their lines)
_LONG_CODE = 2048  # bytes of bytecode (about 200 lines): longer codes get a decoded line table


def _line_table(code) -> tuple:
    if len(code.co_code) <= _LONG_CODE:
        return code, None, None
    starts, lines = array.array("i"), array.array("i")  # machine ints: 8 bytes a range, not 72
    last = None
    for start, _end, line in code.co_lines():  # contiguous ranges: those of one line in a row are one
        line = -1 if line is None else line
        if line != last:
            last = line
            starts.append(start)
            lines.append(line)
    return code, starts, lines


def line_of(frame) -> int:
    """``frame.f_lineno``, cached by (code, instruction offset) (see NOTE [Line numbers of running frames])."""
    code = frame.f_code
    lasti = frame.f_lasti
    line = _LINES.get((id(code), lasti))
    if line is not None:
        return line
    if len(_LINES) >= 65_536:  # code made at run time (exec, lambdas in a loop) stays bounded
        _LINE_CODES.clear()
        _LINES.clear()
    table = _TABLES.get(id(code))
    if table is None or table[0] is not code:
        if len(_TABLES) >= 4096:
            _TABLES.clear()
        table = _TABLES[id(code)] = _line_table(code)
    line = -1
    starts = table[1]
    if starts is not None:
        i = bisect.bisect_right(starts, lasti) - 1
        if i >= 0:
            line = table[2][i]
    if line < 0:
        line = frame.f_lineno
    if line is None:  # no line (an artificial instruction): not cached, as None reads as a miss
        return line
    # NOTE [Line cache entries: the line as the value, the code held apart]
    codes = _LINE_CODES
    ident = id(code)
    held = codes.get(ident)
    if held is None:  # a code held here is alive, so an entry under its id is this code's
        held = codes[ident] = (code, ident)
    key = (held[1], lasti)
    _LINES[key] = line
    if codes.get(ident) is not held:  # let go by a clear meanwhile: no entry without its code held
        _LINES.pop(key, None)
    return line


def user_frame(frame, user: UserCode):
    """The innermost frame at or above `frame` that runs the program's own code, or None.

    None as well when the op runs under torch.compile's tracing machinery.
    """
    verdict = user._verdict
    while frame is not None:
        fn = frame.f_code.co_filename
        v = verdict.get(fn)
        if v is None:
            fn in user
            v = verdict[fn]
        if v is True:
            return frame
        if v is COMPILER:
            return None
        frame = frame.f_back
    return None


_LIBRARY_NAMES: dict = {}  # id(code) -> (code, its short name): a backward or a write from one place, named once


def library_name(frame) -> str:
    """A short name for a library frame, e.g. ``torch/optim/sgd.py:_single_tensor_sgd``."""
    code = frame.f_code
    entry = _LIBRARY_NAMES.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    if len(_LIBRARY_NAMES) >= 4096:
        _LIBRARY_NAMES.clear()
    name = _library_name(code)
    _LIBRARY_NAMES[id(code)] = (code, name)
    return name


def _library_name(code) -> str:
    fn = code.co_filename
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        i = fn.rfind(marker)
        if i >= 0:
            fn = fn[i + len(marker):]
            break
    else:
        fn = os.path.basename(fn)
    return f"{fn}:{code.co_name}"


# --- source positions -------------------------------------------------------

# id(code) -> (code, the instruction index where each run of equal positions starts, the runs' positions as
# a flat array of 4 ints each, -1 for None): keyed by id as in NOTE [Line numbers of running frames]
# (hashing a code object walks its bytecode: 1 ms for a 20,000-line module, at every event of it). Machine
# ints, not tuples (a list of tuples took 70 bytes an instruction: 20 MB for that module), and one entry
# a run: ``co_positions`` gives a position for every 2-byte code unit, and an instruction's inline cache
# units (3.11+) repeat its position, so the 20,000-line module's 457,447 positions are 127,495 runs
# (7.3 MB as 4 ints each, 2.5 MB as runs; benchmarks/RESULTS.md, "mem17"). A position is then found by a
# binary search over the run starts, only where an instruction's segment is not cached (``_SEGMENTS``).
_POSITIONS: dict = {}


def _positions(code):
    entry = _POSITIONS.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    get = getattr(code, "co_positions", None)
    if get is None:
        return None
    starts, flat = array.array("i"), array.array("i")
    last = None
    for i, pos in enumerate(get()):
        if pos != last:
            last = pos
            starts.append(i)
            flat.extend(-1 if v is None else v for v in pos)
    if len(_POSITIONS) >= 4096:
        _POSITIONS.clear()
    found = (starts, flat, i + 1 if last is not None else 0)
    _POSITIONS[id(code)] = (code, found)
    return found


def _position(positions, i: int):
    """(line, end line, column, end column) of code unit ``i`` (-1 for None), or None past the code's end."""
    starts, flat, n = positions
    if not 0 <= i < n:
        return None
    k = (bisect.bisect_right(starts, i) - 1) * 4
    return flat[k], flat[k + 1], flat[k + 2], flat[k + 3]


# NOTE [Segments cached by code, then by instruction]
# The source text of one instruction's expression is a function of (code object, instruction offset), as its
# line is (see NOTE [Line numbers of running frames]): a backward call or a write on a loop's line is sliced out
# of its source once, not at every step. The cache is keyed by the code object's id first (its entry holds the
# code object, so the id cannot be reused meanwhile), then by the offset: no key tuple, id int and value tuple
# an instruction. Equal texts share one string (``_SEGMENT_TEXTS``): a generated script repeats its step's
# lines thousands of times. On a generated 20,000-line script (12,495 recorded instructions, each run once)
# the cache took 3.55 MB at the program's end as (id, offset) -> (code, text) (benchmarks/RESULTS.md,
# "mems18"), the run's peak memory.
_SEGMENTS: dict = {}  # id(code) -> (code, {instruction offset: segment})
_SEGMENT_TEXTS: dict = {}  # a segment -> the one equal string the cache holds
_SEGMENTS_HELD = [0]  # instructions cached, over all codes (bounded as one table of them was)


def call_segment(frame) -> str | None:
    """The exact source text of the expression the frame is executing.

    Uses ``co_positions`` of the current instruction, so for ``y.detach().zero_()``
    inside a longer line it gives that call, not the whole line.
    """
    code = frame.f_code
    lasti = frame.f_lasti
    entry = _SEGMENTS.get(id(code))
    if entry is not None and entry[0] is code:
        segment = entry[1].get(lasti)
        if segment is not None:
            return segment
    segment = _segment(code, lasti)
    if segment is not None:  # no text yet (a file linecache cannot read now) is looked up again later
        if _SEGMENTS_HELD[0] >= 16_384:
            _SEGMENTS.clear()
            _SEGMENT_TEXTS.clear()
            _SEGMENTS_HELD[0] = 0
            entry = None
        if entry is None or entry[0] is not code:
            entry = _SEGMENTS[id(code)] = (code, {})
        segment = _SEGMENT_TEXTS.setdefault(segment, segment)
        entry[1][lasti] = segment
        _SEGMENTS_HELD[0] += 1
    return segment


def segment_at(code, lasti) -> str | None:
    """The source text of the expression instruction ``lasti`` (a byte offset, as ``tb_lasti``) of ``code`` runs."""
    return _segment(code, lasti)


def _segment(code, lasti) -> str | None:
    positions = _positions(code)
    if positions is None:  # Python 3.10: NOTE [The executing call from bytecode and the line's syntax tree]
        return bytecode_segment.segment(code, lasti)
    pos = _position(positions, lasti // 2)
    if pos is None:
        return None
    line, end_line, col, end_col = pos
    if line < 0 or col < 0 or end_line < 0 or end_col < 0:
        return None
    lines = [linecache.getline(code.co_filename, n) for n in range(line, end_line + 1)]
    if not lines or not lines[0]:
        return None
    if len(lines) == 1:
        return _slice_utf8(lines[0], col, end_col)
    parts = [_slice_utf8(lines[0], col, None)] + lines[1:-1] + [_slice_utf8(lines[-1], 0, end_col)]
    return "".join(parts)


def _slice_utf8(text: str, start: int, end: int | None) -> str:
    # co_positions columns are UTF-8 byte offsets.
    raw = text.encode("utf-8")
    return raw[start:end].decode("utf-8", "replace")


# `torch.relu_(h)` and `F.relu_(h)` write through `h`, not through the module
_MODULE_RECEIVERS = {"torch", "F", "functional", "nn.functional", "torch.nn.functional", "torch._C._nn"}


_RECEIVERS: dict = {}  # (segment, op) -> receiver: a line run again (a loop, a generated script) parses once


def release_caches() -> None:
    """Empty the caches of lines, positions, segments and names of code objects (the program has ended; they
    fill again if anything asks). They hold what the program's events ran at: for a generated 20,000-line
    script ~8 MB that stayed under the report's construction, the run's peak (benchmarks/RESULTS.md, "mem17")."""
    for cache in (_LINE_CODES, _LINES, _TABLES, _LIBRARY_NAMES, _POSITIONS, _SEGMENTS, _SEGMENT_TEXTS, _RECEIVERS,
                  bytecode_segment._CODES, bytecode_segment._TREES):
        cache.clear()
    _SEGMENTS_HELD[0] = 0


def receiver(segment: str | None, op: str) -> str | None:
    """The expression an in-place op writes through, from the source of the call.

    ``tmp.mul_(2)`` -> ``tmp``; ``y.detach().zero_()`` -> ``y.detach()``;
    ``x[0] = 1`` -> ``x``; ``x += 1`` -> ``x``; ``torch.relu_(h)`` -> ``h``.
    """
    if not segment:
        return None
    key = (segment, op)
    try:
        return _RECEIVERS[key]
    except KeyError:
        pass
    if len(_RECEIVERS) >= 4096:
        _RECEIVERS.clear()
    found = _RECEIVERS[key] = _receiver(segment, op)
    return found


def _receiver(segment: str, op: str) -> str | None:
    text = segment.strip()
    try:
        node = ast.parse(text, mode="exec").body[0]
    except (SyntaxError, IndexError, ValueError):
        return None
    try:
        if isinstance(node, ast.AugAssign):
            return ast.unparse(node.target)
        if isinstance(node, ast.Assign) and node.targets and isinstance(node.targets[0], ast.Subscript):
            return ast.unparse(node.targets[0].value)
        if isinstance(node, ast.Expr):
            expr = node.value
            if isinstance(expr, ast.Subscript):
                return ast.unparse(expr.value)
            if isinstance(expr, ast.Call):
                func = expr.func
                if isinstance(func, ast.Attribute) and func.attr == op and not (
                        expr.args and ast.unparse(func.value) in _MODULE_RECEIVERS):
                    return ast.unparse(func.value)
                if expr.args:
                    first = expr.args[0]
                    # a literal (`torch.zeros(3, ...)`, `torch.tensor([1.0])`) names no tensor to write through
                    return None if _is_literal(first) else ast.unparse(first)
                return ast.unparse(expr)
            return ast.unparse(expr)
    except Exception:  # ast.unparse on odd trees
        return None
    return None


def _is_literal(node: ast.expr) -> bool:
    """Whether NODE is a constant, or a tuple, list or set of constants: nothing a tensor can be bound to."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):  # -1
        return True
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(_is_literal(e) for e in node.elts)


def source_line(filename: str, line: int | None) -> str:
    """The stripped source text of a line ('' when unavailable)."""
    if not line:
        return ""
    return linecache.getline(filename, line).strip()

