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
number of line events (the window between the save and backward is then named instead).

On Python 3.12 and later the line events come from ``sys.monitoring`` instead of a trace function
(see NOTE [sys.monitoring on Python 3.12 and later] in compat.py): a tool id of tensorscope's own,
PY_START once per code object (a library's code is then DISABLEd for good: no further cost), and
LINE/PY_RETURN events turned on for the program's code objects only. A program's own trace
function or monitoring tool no longer stops the watch there, and is never displaced.
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch

from tensorscope import compat
from tensorscope.instrument import saved, state

MAX_WATCHED = 64
MAX_EVENTS = 50_000  # line events checked in all, per run: the cost stays bounded
SMALL = 1 << 16  # elements: a buffer-like saved input watched without any NumPy sharing

_MAIN = threading.main_thread()
_ne = torch._C.TensorBase.ne
_watched: list = []  # [weakref(Packed), fingerprint at the last check]
_last = [None, None]  # (file, line) of the last line event of the program
_events = [0]
_installed = [False]
_mon = compat.monitoring
_tool = [None]  # the sys.monitoring tool id in use, or None (settrace, or nothing installed)
_codes: set = set()  # code objects with LINE/PY_RETURN events on (cleared at uninstall)
_disabled = weakref.WeakSet()  # code objects whose PY_START was DISABLEd (it stays so for the tool id)


def exposed_input(p, t) -> bool:
    """A saved input that looks like a buffer kernels update in place: small, no grad, a leaf."""
    try:
        return (not p.is_output and not t.requires_grad and t.grad_fn is None and t.device.type == "cpu"
                and 0 < t.numel() <= SMALL and t.is_floating_point())
    except Exception:
        return False


def watch(p) -> None:
    """Start watching the saved tensor of ``p`` (a ``saved.Packed``)."""
    try:
        if (threading.current_thread() is not _MAIN or _events[0] >= MAX_EVENTS or len(_watched) >= MAX_WATCHED
                or p.tensor.device.type != "cpu"):
            return
        if any(ref() is p for ref, _ in _watched):
            return
        if not _installed[0] and not _can_monitor() and sys.gettrace() is not None:
            return  # the program's own tracer (a debugger, coverage): never replaced
        _watched.append([weakref.ref(p), saved.checksum(p.tensor)])
        if not _installed[0]:
            _install(sys._getframe(1))
    except Exception:
        pass


def on_shared(refs) -> None:
    """NumPy now shares the memory of tensors already saved (``refs``: weak refs to their ``Packed``)."""
    for ref in list(refs or ()):
        p = ref()
        if p is not None and p.fingerprint is not None:
            watch(p)


def _free_tool():
    """A sys.monitoring tool id no one uses: not the debugger's, coverage's, profiler's or optimizer's."""
    if _mon is None:
        return None
    for tool in (3, 4):
        if _mon.get_tool(tool) is None:
            return tool
    return None


def _can_monitor() -> bool:
    return _tool[0] is not None or _free_tool() is not None


def _install(frame) -> None:
    rec = state.recorder
    user = rec.user if rec is not None else ()
    _installed[0] = True
    if _install_monitoring(frame, user):
        return
    sys.settrace(_global)
    while frame is not None:  # frames already running get no 'call' event: trace the program's own
        if frame.f_code.co_filename in user:
            frame.f_trace_lines = True
            frame.f_trace = _local
        frame = frame.f_back


def _uninstall() -> None:
    if _installed[0]:
        _installed[0] = False
        if _tool[0] is not None:
            _uninstall_monitoring()
        elif sys.gettrace() is _global:
            sys.settrace(None)


def _install_monitoring(frame, user) -> bool:
    tool = _free_tool()
    if tool is None:
        return False
    try:
        _mon.use_tool_id(tool, "tensorscope")
    except ValueError:  # taken meanwhile
        return False
    _tool[0] = tool
    events = _mon.events
    _mon.register_callback(tool, events.PY_START, _on_start)
    _mon.register_callback(tool, events.LINE, _on_line)
    _mon.register_callback(tool, events.PY_RETURN, _on_return)
    for code in list(_disabled):  # seen by an earlier install: PY_START no longer fires for them
        if code.co_filename in user:
            _follow(tool, code)
    while frame is not None:  # frames already running: their code objects get line events now
        if frame.f_code.co_filename in user:
            _follow(tool, frame.f_code)
        frame = frame.f_back
    _mon.set_events(tool, events.PY_START)
    return True


def _follow(tool, code) -> None:
    if code not in _codes:
        _codes.add(code)
        _mon.set_local_events(tool, code, _mon.events.LINE | _mon.events.PY_RETURN)


def _uninstall_monitoring() -> None:
    tool, _tool[0] = _tool[0], None
    try:
        _mon.set_events(tool, 0)
        for code in _codes:
            _mon.set_local_events(tool, code, 0)
        for event in (_mon.events.PY_START, _mon.events.LINE, _mon.events.PY_RETURN):
            _mon.register_callback(tool, event, None)
        _mon.free_tool_id(tool)
    except Exception:
        pass
    _codes.clear()


def _on_start(code, offset):
    rec = state.recorder
    if rec is not None and code.co_filename in rec.user and _tool[0] is not None:
        _follow(_tool[0], code)
    _disabled.add(code)
    return _mon.DISABLE


def _on_line(code, line):
    if threading.current_thread() is not _MAIN:
        return None
    if not _watched or not _installed[0]:
        _uninstall()
        return None
    _check()
    _last[0], _last[1] = code.co_filename, line
    return None


def _on_return(code, offset, retval):
    if threading.current_thread() is _MAIN and _watched and _installed[0]:
        _check()
    return None


def reset() -> None:
    """At the end of a run: nothing watched, no trace function left behind."""
    _watched.clear()
    _last[0] = _last[1] = None
    _events[0] = 0
    _uninstall()


def _global(frame, event, arg):
    if not _watched:
        _uninstall()
        return None
    rec = state.recorder
    if rec is None or frame.f_code.co_filename not in rec.user:
        return None
    return _local


def _local(frame, event, arg):
    if not _watched or not _installed[0]:
        return None
    if event == "line" or event == "return":
        _check()
        if event == "line":
            _last[0], _last[1] = frame.f_code.co_filename, frame.f_lineno
    return _local


def _check() -> None:
    _events[0] += 1
    if _events[0] >= MAX_EVENTS:
        _watched.clear()
        return
    keep = []
    for entry in _watched:
        p = entry[0]()
        if p is None:
            continue
        try:
            now = saved.checksum(p.tensor)
            if bool(_ne(now, entry[1])):
                entry[1] = now
                if (_last[0], _last[1]) == (p.file, p.line):
                    continue  # changed by the saving line itself (a training-mode BatchNorm's own update)
                if p.tensor._version == p.version and p.changed_at is None and _last[1] is not None:
                    p.changed_at = (_last[0], _last[1])
                    continue  # found: no longer watched
        except Exception:
            continue
        keep.append(entry)
    _watched[:] = keep
    if not keep:
        _uninstall()
