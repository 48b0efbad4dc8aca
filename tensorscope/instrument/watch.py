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
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch

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
        if not _installed[0] and sys.gettrace() is not None:
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


def _install(frame) -> None:
    rec = state.recorder
    user = rec.user if rec is not None else ()
    _installed[0] = True
    sys.settrace(_global)
    while frame is not None:  # frames already running get no 'call' event: trace the program's own
        if frame.f_code.co_filename in user:
            frame.f_trace_lines = True
            frame.f_trace = _local
        frame = frame.f_back


def _uninstall() -> None:
    if _installed[0]:
        _installed[0] = False
        if sys.gettrace() is _global:
            sys.settrace(None)


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
