"""The line that changed a saved tensor's bytes behind autograd's back (explain, run --check-values).

NOTE [Watching exposed saved bytes]
A fingerprint mismatch at unpack (see NOTE [Fingerprints of saved tensors]) says *that* the
bytes changed, not *where*: NumPy writes into shared memory, a BatchNorm kernel updating its
running statistics, a C extension writing through a pointer pass no wrapper. So a saved tensor
exposed to such writes is watched line by line until backward reads it: one whose memory NumPy
shares (saved on a storage `.numpy()`/`from_numpy` made, or shared after it was saved), and a
small saved input that requires no grad (a buffer such as a running statistic). While anything
is watched, a trace function runs on the program's own frames only (the library's calls get
none); at each line event of the program the watched fingerprints are compared, and a tensor
whose bytes changed while its version did not is attributed to the program line that ran last
(the innermost: a write inside a helper of the program names the helper's line). A change made
by the saving line itself (a training-mode BatchNorm updating the statistics it saved, which its
backward never reads) ends the watch without a finding. Nothing is
watched when the program has a trace function of its own (a debugger, coverage), on other
threads, on tensors not on the CPU (a checksum there would synchronise), and after a bounded
number of line events (the window between the save and backward is then named instead). What is
watched belongs to the run (``Tracker.watch``); ``reset`` at its end leaves no trace function behind.

On Python 3.12 and later the line events come from ``sys.monitoring`` instead of a trace function
(see NOTE [sys.monitoring on Python 3.12 and later] in compat.py): a tool id of tensorscope's own
(3 or 4, whichever is free), PY_START once per code object (a library's code is then DISABLEd
for good: no further cost), and LINE/PY_RETURN events turned on for the program's code objects
only. The program's code objects are never DISABLEd, so a later install (a second run in the same
process) still hears their PY_START. A program's own trace function or monitoring tool no longer
stops the watch there, and is never displaced; ``reset`` turns the events off and frees the tool id.
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch

from tensorscope import compat
from tensorscope.instrument.fingerprint import checksum
from tensorscope.instrument.frames import signals_wait
from tensorscope.instrument.quiet import profiling as _profiling
from tensorscope.instrument.quiet import unrecorded as _unrecorded
from tensorscope.instrument.quiet import quiet as _quiet, function_modes as _function_modes

_dispatch_modes = torch._C._len_torch_dispatch_stack

MAX_WATCHED = 64
MAX_EVENTS = 50_000  # line events checked in all, per run: the cost stays bounded
SMALL = 1 << 16  # elements: a buffer-like saved input watched without any NumPy sharing

_MAIN = threading.main_thread()
_ne = torch._C.TensorBase.ne
_mon = compat.monitoring  # None before Python 3.12: settrace only
_TOOLS = (3, 4)  # sys.monitoring ids no one claims: 0-2 and 5 are the debugger, coverage, profiler, optimizer


def exposed_input(p, t) -> bool:
    """A saved input that looks like a buffer kernels update in place: small, no grad, a leaf."""
    try:
        return (not p.is_output and not t.requires_grad and t.grad_fn is None and t.device.type == "cpu"
                and 0 < t.numel() <= SMALL and t.is_floating_point())
    except Exception:
        return False


class Watch:
    """The saved tensors of one run watched line by line (see NOTE [Watching exposed saved bytes])."""

    def __init__(self, user):
        self.user = user  # the program's files (frames.UserCode)
        self.watched: list = []  # [weakref(Packed), fingerprint at the last check]
        self.last = (None, None)  # (file, line) of the last line event of the program
        self.events = 0  # line events checked
        self.installed = False
        self.tool = None  # the sys.monitoring tool id in use, or None (settrace, or nothing installed)
        self._codes: set = set()  # code objects with LINE/PY_RETURN events on (cleared at uninstall)
        # the trace functions, made once: `sys.gettrace() is self._global` must hold while installed
        self._global = self._on_call
        self._local = self._on_line

    def watch(self, p, fresh: bool = False) -> None:
        """Start watching the saved tensor of ``p`` (a ``saved.Packed``); ``fresh``: its fingerprint was
        taken just now (at pack)."""
        try:
            if (threading.current_thread() is not _MAIN or self.events >= MAX_EVENTS
                    or len(self.watched) >= MAX_WATCHED or p.tensor.device.type != "cpu"):
                return
            if any(ref() is p for ref, _ in self.watched):
                return
            if not self.installed and not self._can_monitor() and sys.gettrace() is not None:
                return  # the program's own tracer (a debugger, coverage): never replaced
            # at pack the fingerprint was taken a moment ago: it is the bytes to compare with
            self.watched.append([weakref.ref(p), p.fingerprint if fresh else checksum(p.tensor)])
            if not self.installed:
                self._install(sys._getframe(1))
        except Exception:
            pass

    def on_shared(self, refs) -> None:
        """NumPy now shares the memory of tensors already saved (``refs``: weak refs to their ``Packed``)."""
        for ref in list(refs or ()):
            p = ref()
            if p is not None and p.fingerprint is not None:
                self.watch(p)

    def reset(self) -> None:
        """At the end of a run: nothing watched, no trace function left behind."""
        self.watched.clear()
        self.last = (None, None)
        self.events = 0
        self._uninstall()

    def _install(self, frame) -> None:
        self.installed = True
        if self._install_monitoring(frame):
            return
        sys.settrace(self._global)
        user = self.user
        while frame is not None:  # frames already running get no 'call' event: trace the program's own
            if frame.f_code.co_filename in user:
                frame.f_trace_lines = True
                frame.f_trace = self._local
            frame = frame.f_back

    def _uninstall(self) -> None:
        if self.installed:
            self.installed = False
            if self.tool is not None:
                self._uninstall_monitoring()
            elif sys.gettrace() is self._global:
                sys.settrace(None)

    # -- sys.monitoring (Python 3.12 and later) --------------------------------------------------

    def _can_monitor(self) -> bool:
        return self.tool is not None or _free_tool() is not None

    def _install_monitoring(self, frame) -> bool:
        tool = _free_tool()
        if tool is None:
            return False
        try:
            _mon.use_tool_id(tool, "tensorscope")
        except ValueError:  # taken meanwhile
            return False
        self.tool = tool
        events = _mon.events
        _mon.register_callback(tool, events.PY_START, self._on_start)
        _mon.register_callback(tool, events.LINE, self._on_line_event)
        _mon.register_callback(tool, events.PY_RETURN, self._on_return)
        user = self.user
        while frame is not None:  # frames already running: their code objects get line events now
            if frame.f_code.co_filename in user:
                self._follow(frame.f_code)
            frame = frame.f_back
        _mon.set_events(tool, events.PY_START)
        return True

    def _follow(self, code) -> None:
        if code not in self._codes:
            self._codes.add(code)
            _mon.set_local_events(self.tool, code, _mon.events.LINE | _mon.events.PY_RETURN)

    def _uninstall_monitoring(self) -> None:
        tool, self.tool = self.tool, None
        try:
            _mon.set_events(tool, 0)
            for code in self._codes:
                _mon.set_local_events(tool, code, 0)
            for event in (_mon.events.PY_START, _mon.events.LINE, _mon.events.PY_RETURN):
                _mon.register_callback(tool, event, None)
            _mon.free_tool_id(tool)
        except Exception:
            pass
        self._codes.clear()

    def _on_start(self, code, offset):
        if code.co_filename not in self.user:
            return _mon.DISABLE  # the library's code: no PY_START from it again
        if self.tool is not None:
            self._follow(code)
        return None

    def _on_line_event(self, code, line):
        if threading.current_thread() is not _MAIN:
            return None
        if not self.watched or not self.installed:
            self._uninstall()
            return None
        self._check()
        self.last = (code.co_filename, line)
        return None

    def _on_return(self, code, offset, retval):
        if threading.current_thread() is _MAIN and self.watched and self.installed:
            self._check()
        return None

    # -- sys.settrace (Python 3.10 and 3.11, or both monitoring ids taken) ------------------------

    def _on_call(self, frame, event, arg):
        if not self.watched:
            self._uninstall()
            return None
        if frame.f_code.co_filename not in self.user:
            return None
        return self._local

    def _on_line(self, frame, event, arg):
        if not self.watched or not self.installed:
            return None
        if event == "line" or event == "return":
            self._check()
            if event == "line":
                self.last = (frame.f_code.co_filename, frame.f_lineno)
        return self._local

    def _check(self) -> None:
        self.events += 1
        if self.events >= MAX_EVENTS:
            self.watched.clear()
            return
        if _profiling():  # NOTE [Our ops unseen by the program's profiler] in quiet.py
            with _unrecorded(_quiet()):
                return self._compare()
        if _function_modes() or _dispatch_modes():  # NOTE [Our reads unseen by the program's torch-function modes]
            with _quiet():
                return self._compare()
        self._compare()

    def _compare(self) -> None:
        keep = []
        last = self.last
        for entry in self.watched:
            p = entry[0]()
            if p is None:
                continue
            try:
                now = checksum(p.tensor)
                if bool(_ne(now, entry[1])):
                    entry[1] = now
                    if last == (p.file, p.line):
                        continue  # changed by the saving line itself (a training-mode BatchNorm's own update)
                    if p.tensor._version == p.version and p.changed_at is None and last[1] is not None:
                        p.changed_at = last
                        continue  # found: no longer watched
            except Exception:
                continue
            keep.append(entry)
        self.watched[:] = keep
        if not keep:
            self._uninstall()



# called between the program's instructions (NOTE [A signal handler that lands in a callback of tensorscope's] in exits.py)
for _callback in (Watch._on_start, Watch._on_line_event, Watch._on_return, Watch._on_call, Watch._on_line):
    signals_wait(_callback)


def _free_tool():
    """A sys.monitoring tool id no one uses: not the debugger's, coverage's, profiler's or optimizer's."""
    if _mon is None:
        return None
    for tool in _TOOLS:
        if _mon.get_tool(tool) is None:
            return tool
    return None
