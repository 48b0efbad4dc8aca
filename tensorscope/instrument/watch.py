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
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch

from tensorscope.instrument.fingerprint import checksum

MAX_WATCHED = 64
MAX_EVENTS = 50_000  # line events checked in all, per run: the cost stays bounded
SMALL = 1 << 16  # elements: a buffer-like saved input watched without any NumPy sharing

_MAIN = threading.main_thread()
_ne = torch._C.TensorBase.ne


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
        # the trace functions, made once: `sys.gettrace() is self._global` must hold while installed
        self._global = self._on_call
        self._local = self._on_line

    def watch(self, p) -> None:
        """Start watching the saved tensor of ``p`` (a ``saved.Packed``)."""
        try:
            if (threading.current_thread() is not _MAIN or self.events >= MAX_EVENTS
                    or len(self.watched) >= MAX_WATCHED or p.tensor.device.type != "cpu"):
                return
            if any(ref() is p for ref, _ in self.watched):
                return
            if not self.installed and sys.gettrace() is not None:
                return  # the program's own tracer (a debugger, coverage): never replaced
            self.watched.append([weakref.ref(p), checksum(p.tensor)])
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
            if sys.gettrace() is self._global:
                sys.settrace(None)

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
