"""The forward line of every autograd node, without saved-tensor hooks (Python 3.12 and later).

NOTE [Forward lines from line events]
Autograd numbers each node it builds (``grad_fn._sequence_nr()``) from a per-thread counter,
``torch._C._autograd._get_sequence_nr()``, which is the number the next node will get. So if each
line of the program, as it starts, notes that counter, the nodes numbered from one line's note up
to the next note were built while that line ran, by it or by the library code it called: the
forward line of every node, exact, with no saved-tensor hook and nothing on the tensors. Where
``sys.monitoring`` exists (see NOTE [sys.monitoring on Python 3.12 and later] in compat.py) a tool
of tensorscope's own hears LINE events of the program's code objects only (a library's code costs
one PY_START event, then is DISABLEd) and PY_RETURN/PY_YIELD of the program's functions (the
caller's line goes on after a call into the program's own helper: ``h = torch.sigmoid(helper(x))``). The note
is kept only when a line built a node: a line that built none is overwritten by the next one, so
the record grows with the nodes built, not the lines run, and is bounded (the oldest half goes).
Only the program's main thread notes lines (see NOTE [Nodes other threads built]).

NOTE [Nodes other threads built]
The counter is per thread, and each thread's starts at 0: a node a worker thread built carries a
number that the main thread's record also covers, and looked up there it was named at whatever main
line bracketed that number (a pool's workers' nodes at the ``with ThreadPoolExecutor(...)`` line).
No Python attribute of a node tells its thread (``dir(grad_fn)`` on 2.13). What can be
known is how far the other threads counted: every other thread's nodes are numbered below the
highest counter any of them showed. So each program line, return or yield heard on another thread,
each backward call made there (``note_thread``) and each question asked from there notes its counter
in ``_other``, and the record answers only for numbers at or above it: a node numbered below may
be another thread's, and ``Recorder.node_line`` falls back to the bracket of recorded events, as on
Python 3.10 and 3.11. A thread that runs only library code (its target a library function) shows no
counter: its nodes can still be named at a main line (docs/how-it-works.md, known limits).

Python 3.10 and 3.11 have no such events at a cost a plain run can bear, and no way to hear them
that the program cannot see. Measured (benchmarks/line_hearing_cost.py, RESULTS.md): a
``sys.settrace`` function tracing the program's lines only costs the GPT workload 1.31x alone, a
``sys.setprofile`` function noting each C call from the program's code 1.26x, against run's whole
budget of 1.10x; and either takes the one trace or profile slot that the program's
``sys.gettrace()``, a debugger, coverage or cProfile use. So there ``Tracker.node_line`` falls back
to the bracket of recorded events (see Recorder.node_line); the report then names the line only
where recorded events bracket the node.
"""

from __future__ import annotations

import bisect
import sys
import threading
from array import array

import torch

from tensorscope import compat
from tensorscope.instrument.frames import signals_wait

_mon = compat.monitoring  # None before Python 3.12
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_get_ident = threading.get_ident
_MAIN_ID = threading.main_thread().ident
_TOOLS = (4, 3)  # ids no one claims (0-2 and 5: debugger, coverage, profiler, optimizer); the watch tries 3 first
MAX_ENTRIES = 400_000  # lines that built nodes, kept at once (about 10 MB at most)


class LineRecord:
    """Which program line built which autograd nodes, for one run (see NOTE [Forward lines from line events])."""

    def __init__(self, user):
        self.user = user  # the program's files (frames.UserCode)
        self.tool = None
        self.starts = array("q")  # autograd's next sequence nr when each kept line began
        self.codes: list = []  # the code object of each kept line
        self.lines = array("i")  # its line number
        self._last = [-1]  # the sequence nr of the last kept line (one cell, shared with the callbacks)
        self._other = [0]  # the highest counter another thread showed (NOTE [Nodes other threads built])
        self._codes: set = set()

    @property
    def installed(self) -> bool:
        return self.tool is not None

    def install(self, *frames) -> bool:
        """Start hearing the program's lines; ``frames``: the innermost frames already running (the
        API's block; each thread's, when the program's import of torch installs it), whose program
        frames get line events from now on. False where it cannot."""
        if _mon is None or self.tool is not None:
            return False
        try:
            for tool in _TOOLS:
                if _mon.get_tool(tool) is None:
                    _mon.use_tool_id(tool, "tensorscope")
                    self.tool = tool
                    break
            else:
                return False
            events = _mon.events
            on_line = self._line_callback()
            on_return = self._return_callback(on_line)
            for callback in (self._on_start, on_line, on_return):  # NOTE [A signal handler that lands in a callback of tensorscope's]
                signals_wait(callback)
            _mon.register_callback(self.tool, events.PY_START, self._on_start)
            _mon.register_callback(self.tool, events.LINE, on_line)
            _mon.register_callback(self.tool, events.PY_RETURN, on_return)
            _mon.register_callback(self.tool, events.PY_YIELD, on_return)
            user = self.user
            for frame in frames:
                while frame is not None:
                    if frame.f_code.co_filename in user:
                        self._follow(frame.f_code)
                    frame = frame.f_back
            _mon.set_events(self.tool, events.PY_START)
            return True
        except Exception:
            self.uninstall()
            return False

    def uninstall(self) -> None:
        """Stop hearing lines (what was recorded stays readable until ``clear``)."""
        tool, self.tool = self.tool, None
        if tool is None:
            return
        try:
            _mon.set_events(tool, 0)
            for code in self._codes:
                _mon.set_local_events(tool, code, 0)
            for event in (_mon.events.PY_START, _mon.events.LINE, _mon.events.PY_RETURN, _mon.events.PY_YIELD):
                _mon.register_callback(tool, event, None)
            _mon.free_tool_id(tool)
        except Exception:
            pass
        self._codes.clear()

    def clear(self) -> None:
        del self.starts[:]
        self.codes.clear()
        del self.lines[:]
        self._last[0] = -1
        self._other[0] = 0

    def note_thread(self) -> None:
        """The calling thread, when it is not the main thread, may have built nodes numbered up to its
        counter (NOTE [Nodes other threads built])."""
        if _get_ident() != _MAIN_ID:
            seq = _get_sequence_nr()
            if seq > self._other[0]:
                self._other[0] = seq

    def node_line(self, seq):
        """(file, line) of the program line that built node ``seq``, or None where none is known or
        another thread may have built a node of that number (NOTE [Nodes other threads built])."""
        self.note_thread()
        starts = self.starts
        if not starts or seq < starts[0] or seq < self._other[0]:
            return None
        i = bisect.bisect_right(starts, seq) - 1
        return self.codes[i].co_filename, self.lines[i]

    # -- the callbacks: the hot path (one per program line run) ------------------------------------

    def _follow(self, code) -> None:
        if code not in self._codes:
            self._codes.add(code)
            events = _mon.events
            _mon.set_local_events(self.tool, code, events.LINE | events.PY_RETURN | events.PY_YIELD)

    def _on_start(self, code, offset, _disable=getattr(_mon, "DISABLE", None)):
        # One Python frame deep (see NOTE [Recursion depth under line events] in runner.py): no call into Python
        # once a file's verdict is cached.
        verdict = self.user._verdict.get(code.co_filename)
        if verdict is None:
            verdict = code.co_filename in self.user  # a file seen the first time: classified, cached
        if verdict is not True:
            return _disable  # the library's code: never heard again
        if self.tool is not None and code not in self._codes:
            self._follow(code)
        return None

    def _line_callback(self):
        """The LINE callback: a closure over the record's arrays (no attribute lookups per line)."""
        starts, codes, lines, last, other = self.starts, self.codes, self.lines, self._last, self._other
        seq_nr, ident, main, half = _get_sequence_nr, _get_ident, _MAIN_ID, MAX_ENTRIES // 2

        def on_line(code, line):
            seq = seq_nr()
            if ident() != main:  # another thread: only how far it counted (NOTE [Nodes other threads built])
                if seq > other[0]:
                    other[0] = seq
                return None
            if seq == last[0]:  # the line before built no node: this one takes its place
                codes[-1] = code
                lines[-1] = line
                return None
            last[0] = seq
            starts.append(seq)
            codes.append(code)
            lines.append(line)
            if len(codes) > MAX_ENTRIES:
                del starts[:half], codes[:half], lines[:half]
            return None

        return on_line

    def _return_callback(self, on_line):
        user = self.user
        verdicts = user._verdict  # one frame deep: see NOTE [Recursion depth under line events] in runner.py
        getframe = sys._getframe
        seq_nr, ident, main, other = _get_sequence_nr, _get_ident, _MAIN_ID, self._other

        def on_return(code, offset, retval):
            """A program function returns (or yields): its caller's line (the nearest program frame) goes on."""
            if ident() != main:  # the last line of a thread's function may have built nodes: its counter now
                seq = seq_nr()
                if seq > other[0]:
                    other[0] = seq
                return None
            try:
                frame = getframe(1).f_back
                while frame is not None:
                    verdict = verdicts.get(frame.f_code.co_filename)
                    if verdict is True or verdict is None and frame.f_code.co_filename in user:
                        break
                    frame = frame.f_back
                if frame is not None:
                    on_line(frame.f_code, frame.f_lineno)
            except Exception:
                pass
            return None

        return on_return
