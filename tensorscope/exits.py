"""How a run ends the process when the program does not return to tensorscope.

NOTE [Ending as python ends]
Under plain python ``os._exit(n)`` ends the process at once, from any thread, and cannot be
caught; SIGTERM and SIGHUP (the default action) end it by the signal, without a traceback; an
uncaught KeyboardInterrupt ends it by SIGINT. Under tensorscope each of them first writes the
report, then ends the process the same way:

- ``os._exit`` is replaced by a function that writes the report and calls the real one. Nothing
  is raised, so no ``except`` or ``finally`` of the program runs.
- SIGTERM and SIGHUP get a handler while their disposition is the default. The program does not
  see it: ``signal.getsignal`` answers SIG_DFL, ``signal.signal`` returns SIG_DFL for it, and
  setting SIG_DFL puts it back. A handler the program installs replaces it, as under python.
- The report gets at most ``GRACE`` seconds; then the process ends anyway, without it (the file
  at ``-o`` is then the previous one, untouched: see NOTE [Atomic report] in cli.py).
- A forked child (a DataLoader worker, a multiprocessing fork) ends at once, as under python,
  and never writes the parent's report.

After the program, while the report is built and written, SIGINT, SIGTERM and SIGHUP are held
(``HeldSignals``): the report is finished, then the process dies by the first of them; a second
one ends it at once.

Once the program has ended the process (the report is written from the signal's handler or from
``os._exit``), none of the program's own Python signal handlers runs any more: under python the
process is gone. Measured on a DataLoader with workers: SIGTERM to the process group (``timeout``,
Slurm) kills the workers too, their SIGCHLD reaches torch's handler
(torch/utils/data/_utils/signal_handling.py) while the main thread builds the report, and that
handler raises "DataLoader worker (pid N) is killed by signal: Terminated." inside it, losing the
report. ``mute_program_handlers`` replaces each such handler by one that does nothing (main thread
only: signal.signal refuses elsewhere; the process ends right after, so nothing is put back).
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import signal
import sys
import sysconfig
import threading
import types
import _thread
import weakref

from tensorscope.instrument.frames import SIGNALS_RUN, SIGNALS_WAIT, is_tensorscope_file, peek_locals, strip_for_reraise
from tensorscope.instrument.frames import _PACKAGE_DIR
from tensorscope.instrument.transparent import named


#: seconds the report may take once the program ended the process (os._exit, SIGTERM, SIGHUP)
GRACE = 10.0

FATAL = (signal.SIGTERM, signal.SIGHUP)  # their default action ends the process
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# the real functions: the program sees wrappers of them during the run (fatal_signals_report)
_signal, _getsignal = signal.signal, signal.getsignal


def die_by(signum: int, real_exit=os._exit, flush: bool = False) -> None:
    """End the process by ``signum`` as its default action does (from the main thread), else
    with 128 + signum, the status a shell shows for it. ``flush``: write out what ``sys.stdout``
    and ``sys.stderr`` hold first (the default action, like ``os._exit``, loses it)."""
    if flush:
        _flush()
    try:
        _signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    except (ValueError, OSError):  # not the main thread: the disposition cannot be changed
        pass
    real_exit(128 + signum)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _say(text: str) -> None:
    try:
        os.write(2, f"tensorscope: {text}\n".encode())
    except OSError:
        pass


class Ending:
    """The end of one run's process by the program (see NOTE [Ending as python ends]).

    ``report(status, signum)`` writes the report and returns the exit status to use instead of
    ``status`` (or None); ``real_exit`` is the real ``os._exit``.
    """

    def __init__(self, report, real_exit):
        self.pid = os.getpid()
        self._report = report
        self._real_exit = real_exit
        self._lock = threading.Lock()
        self._started = False

    def in_child(self) -> bool:
        """True in a process forked from the one that started the program."""
        return os.getpid() != self.pid

    def end(self, status: int | None = None, signum: int | None = None, **how) -> None:
        """Write the report (at most GRACE seconds), then ``os._exit(status)`` or die by ``signum``.
        ``how``: passed to ``report`` (``timed_out=True``: --timeout ended the run, runner.Alarm)."""
        with self._lock:
            first, self._started = not self._started, True
        if not first:  # a second ending: a signal ends the process at once; a thread waits for the first
            if signum is not None:
                die_by(signum, self._real_exit)
            threading.Event().wait()
        watchdog = threading.Timer(GRACE, self._late, (status, signum))
        watchdog.daemon = True
        watchdog.start()
        held = None
        if threading.current_thread() is threading.main_thread():
            held = HeldSignals(self._real_exit)
            mute_program_handlers()
        replaced = None
        try:
            replaced = self._report(status, signum, **how)
        except BaseException:  # the report is lost (a Ctrl-C meanwhile); the process ends as python's would
            pass
        if signum is not None:
            die_by(signum, self._real_exit)
        if held is not None and held.pending is not None:
            die_by(held.pending, self._real_exit)
        self._real_exit(status if replaced is None else replaced)

    def _late(self, status, signum) -> None:
        _say(f"the report took more than {GRACE:g} s; ending without it")
        self._real_exit(status if signum is None else 128 + signum)


_CAME: list = []  # the signals ``_nothing`` stood in for (NOTE [The program's handlers while its threads are joined])


def _nothing(signum, frame) -> None:
    """A program's handler once the process is ending (see NOTE [Ending as python ends]), or while the report
    is built (the signal is noted for ``HeldSignals.interruptible``)."""
    if len(_CAME) < 64 and signum not in _CAME:
        _CAME.append(signum)


def signals_noted() -> bool:
    """Whether a signal came for a muted handler of the program's since the program ended (``_nothing``)."""
    return bool(_CAME)


def _mute_first() -> None:
    """``mute_program_handlers`` as the first thing a fatal signal's handler does. A program's handler whose
    signal came meanwhile (a worker's SIGCHLD right after the group's SIGTERM) runs at the next bytecode of
    ours until it is muted, and its exception (torch's "DataLoader worker ... is killed by signal") would end
    the report before it began: under python the process is gone and runs no handler, so that exception is
    dropped and the muting goes on."""
    for _ in range(64):
        try:
            mute_program_handlers()
            return
        except BaseException:
            continue


def mute_program_handlers() -> None:
    """Every Python-level handler but the held signals' does nothing from now on (main thread only)."""
    for s in signal.valid_signals():
        if s in HELD:
            continue
        try:
            if callable(_getsignal(s)):
                _signal(s, _nothing)
        except (ValueError, OSError, TypeError, RuntimeError):
            pass


# NOTE [Signals wait while tensorscope installs itself]
# The instrumentation is installed inside the program's ``import torch`` (NOTE [Instrumenting at the
# program's import of torch] in torch_import.py): a few hundred milliseconds of tensorscope's code in the
# program's main thread. A Python-level handler that raises there (Ctrl-C's KeyboardInterrupt, the program's
# own SIGALRM handler) used to stop the install half way: some of torch's functions wrapped, others not, no
# tracker, and the program, which may catch KeyboardInterrupt and go on, ran on with them; its report said
# "the program never imported torch" (tests/test_torch_import.py). So while it installs itself, each signal
# with a Python-level handler (the program's, python's SIGINT handler, tensorscope's SIGTERM/SIGHUP stand-ins)
# is noted instead; then the handlers are put back and each signal that came is raised again
# (``signal.raise_signal``): its handler runs at once, in the main thread, at the end of the program's import
# statement, and its KeyboardInterrupt comes out of ``import torch`` (torch imported, the instrumentation
# whole), as a Ctrl-C a moment later than it came. A signal whose disposition is SIG_DFL or SIG_IGN is the
# kernel's business, as under python. Main thread only (signal.signal refuses elsewhere; no Python handler
# runs in another thread anyway).


class handlers_held:
    """Every Python-level signal handler waits until the block ends (NOTE [Signals wait while tensorscope
    installs itself]). A class, not a generator: the handler that runs at its end raises from a frame of
    tensorscope's own, which the program's traceback leaves out (contextlib's would show)."""

    def __enter__(self):
        self.came: list = []
        self.saved: dict = {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for s in signal.valid_signals():
            try:
                if callable(_getsignal(s)):
                    self.saved[s] = _signal(s, self._note)
            except (ValueError, OSError, TypeError, RuntimeError):
                pass
        return self

    def _note(self, signum, frame):
        if signum not in self.came:
            self.came.append(signum)

    def __exit__(self, *exc):
        saved, self.saved = self.saved, {}
        for s, h in saved.items():
            try:
                if _getsignal(s) == self._note:
                    _signal(s, h)
            except (ValueError, OSError, TypeError, RuntimeError):
                pass
        came, self.came = self.came, []
        for s in came:  # each handler runs here, in the main thread, as the signal came now
            try:
                signal.raise_signal(s)
            except (ValueError, OSError):
                pass
        return False


@contextlib.contextmanager
def os_exit_reports(ending: Ending, real_exit):
    """``os._exit(n)`` writes the report, then exits with n (see NOTE [Ending as python ends])."""
    def _exit(status):
        os.WEXITSTATUS(status)  # os._exit's own TypeError/OverflowError for a status that is not a C int
        if ending.in_child():
            real_exit(status)
        ending.end(status=status)

    os._exit = named(_exit, real_exit)
    try:
        yield
    finally:
        os._exit = real_exit


def stand_ins() -> tuple:
    """The signals whose handler now is tensorscope's stand-in for SIG_DFL (``fatal_signals_report``)."""
    return tuple(s for s in FATAL if getattr(_getsignal(s), "tensorscope_default", False))


def default_again(signals) -> None:
    """In a forked child: SIG_DFL again where the stand-in was, so the kernel ends the child at once as
    under python (NOTE [A signal that reaches a child before it runs] in children.py)."""
    for s in signals:
        try:
            _signal(s, signal.SIG_DFL)
        except (ValueError, OSError):
            pass


# NOTE [A signal handler that lands in a callback of tensorscope's]
# A Python-level signal handler runs at the main thread's next check for pending calls, in whatever Python
# frame runs then. Under tensorscope that is sometimes a callback of tensorscope's that C code calls between
# two of the program's instructions:
# - the weak reference callback that forgets a dead tensor's id (recorder.py), and kept.py's: CPython prints
#   their exception as "Exception ignored in: <function _forgetter.<locals>.forget ...>" and drops it. A
#   Ctrl-C landing there was lost (0.4 % of where a signal lands in a loop that makes and drops tensors,
#   benchmarks/RESULTS.md "faults17"), and so was the exception of a handler of the program's (its own
#   SIGINT handler, a SIGALRM timeout, torch's SIGCHLD handler of a DataLoader);
# - on Python 3.12+ the ``sys.monitoring`` callbacks of the line record (lines.py), and the saved-tensor
#   watch's (watch.py): the handler ran there with ``frame`` a frame of tensorscope's, and its exception
#   entered the program at the line's first instruction, not at the check python makes (the carets of
#   the traceback differed; measured with tests/programs/faults/ctrl_c_as_a_tensor_dies.py, 3.12 x 2.9.1
#   and 3.13 x 2.15.0).
# So while the program runs, every Python-level handler (python's SIGINT handler, and each one the program
# installs) is called through ``guard``. Where it lands in such a callback (``frames.signals_wait`` marks
# them; or in tensorscope code one of them called), the signal is marked as arrived again once ``guard``
# has returned (``_trip_on_return``) and its handler runs at the next check after the callback returns:
# in the program's code, where python runs it (the same line, the same traceback, the same ``frame``).
# Elsewhere the handler runs at once, with the nearest frame that is not tensorscope's as ``frame``, and
# its exception leaves ``guard``'s entry out of the traceback (NOTE [Invisible frames] in
# instrument/patches.py). Since faults20 tensorscope's wrappers and hooks wait too (NOTE [A signal handler
# that lands in tensorscope's code] below), except one waiting in a system call for the program
# (children.py's ``os.waitpid``), which a signal marked as arrived does not interrupt. The
# program sees its own handlers: ``signal.getsignal`` and ``signal.signal``'s return value give them, and
# once the program has ended they are put back as they were (``unguarded``). Nothing on the hot path:
# ``forget`` is as it was, and ``guard`` runs only when a signal comes. A handler set through the real
# ``signal.signal`` taken before the run (``from signal import signal`` in a module imported before it:
# none of torch's) is not guarded.


# NOTE [A signal handler that lands in tensorscope's code]
# (faults20.) faults19 measured the handler running in a *wrapper* of tensorscope's too (a torch function's
# or method's, an optimizer step's hook, a saved-tensor hook, a finite check), not only in the callbacks
# above: 8,000 SIGINTs into an Adam loop, 10.7 % of the handler's calls under ``run``, 57 % under ``explain``
# (3.11). There the handler's exception (a program's ``Stop``, a SIGALRM ``TimeoutError``) met tensorscope's
# ``except Exception`` and was lost (4-8 % of them), or the call's event was left half recorded (a
# ``detach_`` left out of the events: tests/programs/faults/handler_in_a_wrapper.py). So the rule of the
# callbacks holds wherever tensorscope's code runs on the program's behalf: ``_deferred`` walks out from the
# frame the handler would get, over the standard library's and installed packages' frames (torch's), to the
# first other frame. Where that frame is tensorscope's, and the program's code (or a library's) called it,
# the signal is marked as arrived again when ``guard`` returns and heard at the next check, back in the code
# that called tensorscope's once it has returned (each check inside defers again: one ``guard`` call). So a
# handler never runs in tensorscope's frames, nor in torch's or the standard library's code that
# tensorscope's own code called (``origin_walk.arm``'s ``register_hook``, ``usercode``'s ``realpath``).
# It runs at once:
# - where a wrapper calls the function it wraps: the library frame it called runs a function the wrapper
#   holds in a local or closure variable (``_passes``: the original, ``orig(*args)``). Python runs the
#   handler inside that call too (torch's ``autograd.backward`` under the wrapper of ``Tensor.backward``),
#   and its exception leaves the call as under python;
# - in a wrapper that waits in a system call for the program (children.py's ``os.waitpid``, marked by
#   ``frames.signals_run``): a signal marked as arrived does not interrupt the wait it goes back to (a
#   SIGALRM timeout of the program's would wait for the child), so the handler runs there, as python runs
#   it inside ``os.waitpid`` (tests/programs/faults/handler_in_waitpid.py);
# - in tensorscope's code with nothing of the program's below it (``_START``: the frame that called
#   tensorscope's command; before the program's code runs, or after it returned).
# A signal heard while ``_deferred`` decides (``_DECIDING``: a storm, an active trace function under
# ``explain``) is marked as arrived again at once, without a walk, and the anchor is made while
# ``_DECIDING`` is set, so that a handler never runs (and raises) inside ``_trip_on_return``. Tried and
# dropped (both hung a 3.11 ``explain`` under a storm of 8,000 SIGINTs, killed after 280-600 s, as
# faults19's attempt did): a nested call of the same signal counted as one arrival; the signals heard
# while deciding collected and marked again by the call deciding. (faults21) In such a storm under ``explain``
# on 3.11, "Exception ignored in: operator.methodcaller('trip')" (an ``AttributeError``) was printed: a
# RecursionError of nested ``guard`` calls raised by a C call in ``_trip_on_return`` after the wire was made and
# before its ``trip`` was set; the anchor, freed with the frame (here when ``strip_traceback`` unlinked the
# traceback that held it), fired a wire without ``trip``. ``trip`` is now made first: nothing between the wire and
# its ``trip`` can raise. A RecursionError of ``guard``'s decision re-arms the signal (``interrupt_main``) instead
# of reaching the program, and the walks call no Python function (each call is a trace event of explain's watch
# on 3.10/3.11, and a check where the storm's next signal runs another ``guard``). The walk reads the locals of
# one frame of tensorscope's (``peek_locals``/``f_locals``) only where a library frame, or the program's, was
# called by it. Cost: only when a signal comes.

# NOTE [The program's code that tensorscope's code calls]
# (faults21.) tensorscope's own code sometimes calls the program's: its record of ``param.data = new`` reads the new
# value's shape and strides (recorder ``describe``), which a program's tensor subclass hands to its own
# ``__torch_function__`` (28 calls for one ``.data`` set, where python makes none); a program object's ``__del__`` or
# weak reference callback runs where tensorscope drops the last reference. A handler that came there ran at once,
# inside tensorscope's frames, and its exception met tensorscope's ``except Exception``: the program's ``Stop`` was
# lost (tests/programs/faults/handler_in_torch_function.py). Under python nothing of the program's runs there; the
# signal would be heard at the program's next check. So ``_must_wait`` walks over the program's frames too, down to
# tensorscope's first frame, and such a landing waits as in tensorscope's own code. It runs at once, as python runs
# it, where the program's code was called by a wrapper's call of its original: the program's ``__torch_function__``
# under ``Tensor.mul_``'s wrapper, a hook under the wrapper of ``backward``. A wrapper's call of its original is told
# by its frame's current line (``_calls_original``): it loads, from a local or closure variable, a callable that is
# not tensorscope's (the original: C's, torch's or the program's), and the wrapper was called by the program or a
# library, not by tensorscope's own code (``rg_get``, the ``requires_grad`` getter's wrapper, is called by
# ``describe`` too). A bookkeeping line that calls an original held in a local would be taken for a pass (the
# handler at once, as before); none was found. The calls themselves (the program's ``__torch_function__`` seeing
# tensorscope's reads) are a transparency fault of their own, left (the record of a `.data` set is kept unseen
# by torch-function modes only: ``_unseen`` in patches.py).


def _stdlib_file(filename: str, _cache={}) -> bool:
    """True for a file of python's standard library, not site-packages; and for code without a file (frozen
    modules; ``<string>``: 3.10's namedtuple ``__new__``, which ``dis`` calls inside tensorscope's code)."""
    verdict = _cache.get(filename)
    if verdict is None:
        verdict = _cache[filename] = filename.startswith("<") or (
            filename.startswith(_STDLIB) and "site-packages" not in filename and "dist-packages" not in filename)
    return verdict


_STDLIB = tuple({os.path.join(f(p), "") for f in (os.path.abspath, os.path.realpath)
                 for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"], os.path.dirname(os.__file__))})


def _library_file(filename: str) -> bool:
    """True for python's standard library and installed packages (torch among them)."""
    if _stdlib_file(filename) or "site-packages" in filename or "dist-packages" in filename:
        return True
    where = getattr(sys.modules.get("torch"), "__file__", None)  # a torch built in a source tree
    return isinstance(where, str) and filename.startswith(os.path.join(os.path.dirname(where), ""))


def _passes(frame, callee) -> bool:
    """Whether tensorscope's ``frame`` called ``callee``'s function on the program's behalf: a function it holds
    in a local or closure variable (the original that a wrapper wraps), not one it looked up itself."""
    code = callee.f_code
    try:
        values = list(frame.f_locals.values())
    except Exception:  # noqa: BLE001  (a frame that cannot say: not a pass)
        return False
    for v in values:
        t = type(v)
        if t is types.MethodType:
            v, t = v.__func__, type(v.__func__)
        if t is types.FunctionType and v.__code__ is code:
            return True
    return False


def _must_wait(frame) -> bool:
    """Whether a handler given ``frame`` waits (NOTE [A signal handler that lands in tensorscope's code]). The walks
    call no Python function (``is_tensorscope_file`` inlined): under ``explain`` on 3.10/3.11 each Python call here
    is a call event of the saved-tensor watch's trace function, and a check where a storm's next signal comes."""
    ours = _OURS
    callee = None
    # faults21: over the program's frames too (NOTE [The program's code that tensorscope's code calls])
    while frame is not None and not frame.f_code.co_filename.startswith(ours):
        callee, frame = frame, frame.f_back  # a library's code or the program's, down to tensorscope's first frame
    if frame is None:
        return False
    wrapper = frame
    while frame is not None and frame.f_code.co_filename.startswith(ours):
        code = frame.f_code
        if code in SIGNALS_WAIT:
            break
        if code in SIGNALS_RUN:
            return False
        frame = frame.f_back
    else:
        if frame is None or frame is _START[0]:
            return False  # nothing of the program's below tensorscope's code
    if callee is None or wrapper.f_back is not None and wrapper.f_back.f_code.co_filename.startswith(ours):
        return True  # tensorscope's own code, or a wrapper that tensorscope's code called (faults21)
    if _library_file(callee.f_code.co_filename):
        return not _passes(wrapper, callee)  # a wrapper's call of the original: python runs the handler there too
    # faults21: the program's code, called from C by a wrapper's call of the original (its ``__torch_function__``,
    # its hook): python runs it there too
    return not _calls_original(wrapper)


_OURS = _PACKAGE_DIR  # what ``is_tensorscope_file`` compares


# faults21
_LOADS = frozenset(("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
                    "LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"))


def _call_names(code, lasti: int, _cache={}) -> tuple:
    """The local and closure variables that ``code``'s line of instruction ``lasti`` loads before it."""
    key = (code, lasti)
    names = _cache.get(key)
    if names is None:
        import dis

        starts = [offset for offset, line in dis.findlinestarts(code) if offset <= lasti]
        first = max(starts) if starts else 0
        found = []
        for ins in dis.get_instructions(code):
            if first <= ins.offset <= lasti and ins.opname in _LOADS:
                found.extend(ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
        names = _cache[key] = tuple(found)
    return names


def _calls_original(frame) -> bool:
    """Whether tensorscope's ``frame`` is calling a function it holds in a local or closure variable that is not
    tensorscope's own (a wrapper's original, C's or a program's): one its current line loads."""
    names = _call_names(frame.f_code, frame.f_lasti)
    if not names:
        return False
    try:
        values = peek_locals(frame)
    except Exception:  # noqa: BLE001  (a frame that cannot say: not a pass)
        return False
    for name in names:
        v = values.get(name)
        if type(v) is types.MethodType:
            v = v.__func__
        if type(v) is types.FunctionType:
            if not is_tensorscope_file(v.__code__.co_filename):
                return True
        elif callable(v) and not isinstance(v, type) and not (
                str(getattr(v, "__module__", None) or "").startswith("tensorscope")
                or type(v).__module__.startswith("tensorscope")):
            return True
    return False
# end faults21


_DECIDING: list = []  # not empty while ``_deferred`` walks the stack
_START: list = [None]  # the frame that called tensorscope's command: below it, nothing of the program's


def _deferred(signum: int, frame):
    """An anchor that marks ``signum`` as arrived again when the caller's frame ends, where the handler must
    wait; None where it runs now (NOTE [A signal handler that lands in tensorscope's code])."""
    if _DECIDING:
        return _trip_on_return(signum)
    _DECIDING.append(signum)
    try:  # the anchor is made while _DECIDING is set: a call meanwhile never runs a handler in _trip_on_return
        anchor = _trip_on_return(signum) if frame is not None and _must_wait(frame) else None
    finally:
        del _DECIDING[:]  # no call: no check between this and the return
    return anchor
# end faults20


def unguarded(signum: int, handler):
    """The handler the program set, where ``handler`` is the guard that calls it."""
    targets = getattr(handler, "tensorscope_targets", None)
    return handler if targets is None else targets.get(signum, handler)


@contextlib.contextmanager
def fatal_signals_report(ending: Ending, program_returned=None):
    """SIGTERM and SIGHUP write the report, then the process dies by them (see NOTE [Ending as python ends]);
    the program's handlers never run inside a callback of tensorscope's (NOTE [A signal handler that lands
    in a callback of tensorscope's]). ``program_returned(frame)``: whether the program's main code has returned
    (or raised) while ``frame`` runs; a handler the program set is then noted, not run (NOTE [A signal between
    the program's end and the muting])."""
    real_signal, real_getsignal = _signal, _getsignal
    _CAME.clear()

    def handler(signum, frame):
        try:
            if not ending.in_child():
                _mute_first()
                ending.end(signum=signum)
        finally:  # a forked child, or anything going wrong: the default action, as under python
            die_by(signum)

    handler.tensorscope_default = True  # stands for SIG_DFL (see HeldSignals.release)

    targets: dict = {}  # signal -> the program's handler (python's SIGINT handler first), called by guard
    set_by_program: set = set()  # the signals whose handler the program set during the run

    def guard(signum, frame):
        # faults20: a handler landing in tensorscope's code waits for the program's next check (_deferred)
        try:
            anchor = _deferred(signum, frame)  # dies as guard returns: the signal comes again
        except RecursionError:  # faults21: nested calls of guard in a storm; the program's code never gets it
            try:
                _thread.interrupt_main(signum)  # heard again once this call has returned, one level up
            except BaseException:
                pass
            return
        if anchor is not None:
            return
        # end faults20
        target = targets.get(signum)
        if target is None:
            return
        if (frame is not None and program_returned is not None and signum in set_by_program
                and _programs_handler(target) and program_returned(frame)):
            _nothing(signum, frame)  # NOTE [A signal between the program's end and the muting]
            return
        while frame is not None and is_tensorscope_file(frame.f_code.co_filename):
            frame = frame.f_back  # the program's frame (or the library's) that called tensorscope's code
        try:
            target(signum, frame)
        except BaseException as e:
            strip_for_reraise(e)
            raise

    guard.tensorscope_targets = targets
    f, start = sys._getframe(), None  # faults20: the frame below tensorscope's outermost one (_must_wait)
    while f is not None:
        if is_tensorscope_file(f.f_code.co_filename):
            start = f.f_back
        f = f.f_back
    _START[0] = start

    def program_handler(h) -> bool:
        return callable(h) and not getattr(h, "tensorscope_own", False) \
            and not getattr(h, "tensorscope_default", False) and getattr(h, "tensorscope_targets", None) is None

    ours = [s for s in FATAL if real_getsignal(s) == signal.SIG_DFL]

    def seen(signalnum, h):
        if h is handler:
            return signal.SIG_DFL
        return targets.get(signalnum, h) if h is guard else h

    def signal_(signalnum, handler_):
        if signalnum in ours and not callable(handler_) and handler_ == signal.SIG_DFL:
            handler_ = handler
        if program_handler(handler_):
            before = targets.get(signalnum, _UNSET)
            targets[signalnum] = handler_  # before the real call: the signal may come right after it
            set_by_program.add(signalnum)
            try:
                previous = real_signal(signalnum, guard)
            except BaseException:
                if before is _UNSET:
                    targets.pop(signalnum, None)
                else:
                    targets[signalnum] = before
                raise
            return before if previous is guard and before is not _UNSET else seen(signalnum, previous)
        previous = real_signal(signalnum, handler_)
        return seen(signalnum, previous)

    def getsignal(signalnum):
        return seen(signalnum, real_getsignal(signalnum))

    for s in ours:
        real_signal(s, handler)
    guarded = []
    if threading.current_thread() is threading.main_thread():
        for s in signal.valid_signals():
            try:
                h = real_getsignal(s)
                if program_handler(h):
                    targets[s] = h
                    real_signal(s, guard)
                    guarded.append(s)
            except (ValueError, OSError, TypeError, RuntimeError):
                pass
    signal.signal, signal.getsignal = named(signal_, real_signal), named(getsignal, real_getsignal)
    try:
        yield
    finally:
        _START[0] = None  # faults20
        signal.signal, signal.getsignal = real_signal, real_getsignal
        for s in ours:
            if real_getsignal(s) is handler:
                real_signal(s, signal.SIG_DFL)
        for s in list(targets):
            try:
                if real_getsignal(s) is guard:
                    real_signal(s, targets[s])
            except (ValueError, OSError, TypeError, RuntimeError):
                pass


_UNSET = object()


class _Tripwire(weakref.ref):
    __slots__ = ("trip",)


class _Anchor:
    __slots__ = ("__weakref__", "wire")


_TRIP = operator.methodcaller("trip")


def _trip_on_return(signum: int) -> "_Anchor":
    """Mark ``signum`` as arrived again once the caller's frame is gone (NOTE [A signal handler that lands in a
    callback of tensorscope's]). ``_thread.interrupt_main`` called here would be heard
    at the very next check, inside the caller: the handler again, and again. So it is called from C when the
    caller's frame is cleared: the anchor dies with the frame's locals, and its weak reference's callback is
    ``ref.trip()``, a ``functools.partial`` of ``_thread.interrupt_main``: C calling C, no Python frame, no
    check in between. The next check is then in the frame the handler ran in, or in a later one."""
    trip = functools.partial(_thread.interrupt_main, signum)  # faults21: made before the wire (see below)
    anchor = _Anchor()
    wire = _Tripwire(anchor, _TRIP)
    wire.trip = trip  # no call between the wire and its ``trip``: nothing can raise there (a RecursionError)
    anchor.wire = wire  # the reference lives until its referent dies: its callback runs
    return anchor  # the caller holds it in a local until its frame ends


def _programs_handler(h) -> bool:
    """Whether ``h`` is a handler the program set (not python's SIGINT handler, not tensorscope's)."""
    return callable(h) and h is not signal.default_int_handler and h is not _nothing \
        and not getattr(h, "tensorscope_default", False) and not getattr(h, "tensorscope_own", False)


# NOTE [The program's handlers while its threads are joined]
# Under python, once the main code has ended, the interpreter's shutdown joins the non-daemon threads
# (``threading._shutdown``), and the main thread's lock waits there run the program's Python signal handlers:
# a graceful stop (``signal.signal(SIGTERM or SIGUSR1, lambda *a: stop.set())`` with a worker thread that loops
# until ``stop``) ends the threads and the process exits 0. So while tensorscope joins the program's threads
# (runner._join_threads, ``HeldSignals.interruptible``) the handlers muted for the report's build are the
# program's again, and a held signal (SIGINT, SIGTERM, SIGHUP) for which the program set a handler of its own
# runs that handler; only one left at python's default (SIGINT's KeyboardInterrupt, SIGTERM's and SIGHUP's
# death) stops the waiting. Measured: the program above waited for ever under run (SIGUSR1), or died by
# SIGTERM (143) instead of exiting 0 (tests/test_timeout_ends.py). A signal that came between the program's end
# and the join (while the instrumentation stops) was noted by the muted handler, or held, and is raised again at
# the join's start, where the program's handler runs. An exception that such a handler raises (or a Ctrl-C's
# KeyboardInterrupt) stops the waiting, as it stops python's ``threading._shutdown``, and is printed as python
# prints it there, "Exception ignored in: <module 'threading' ...>", the exit status staying the program's
# (NOTE [An exception while the program's threads are joined] in runner.py).


class Stopped(BaseException):
    """SIGTERM or SIGHUP while the program's threads are joined (``HeldSignals.interruptible``)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# NOTE [A signal between the program's end and the muting]
# ``HeldSignals.mute_program`` mutes the program's handlers once the program's main code has returned, but a few
# bytecodes of tensorscope's run before it: the check right after ``exec`` returns in runner._execute, the
# ``finally`` that stops the timer and builds the HeldSignals. A handler of the program's whose signal came during
# the program's last instructions ran there, in tensorscope's frames, and its exception became the program's:
# exit 1 and its traceback where python exits 0 (under python that handler runs, if at all, in the interpreter's
# shutdown, where its exception is printed as ignored). Seen once in a clean-clone CI run (tests/test_timeout_ends.py,
# a child sending SIGUSR1 every 2 ms from the program's last line): a window of a few bytecodes, rare and real. A
# flag set after ``exec`` returns would have the same window, so ``guard`` reads the stack it interrupted instead:
# while the program runs, some frame on it was called by ``_execute`` (the program's ``<module>``, or runpy's for
# ``-m``); once none is, the program's main code is over (runner._program_returned). Then a handler the program set
# (not python's SIGINT handler, not one set before the run) is noted, as the muted handler notes it. The signals
# noted until the program's threads are joined run their handlers there (``HeldSignals.replay``), also when there
# is no thread to join: that is python's ``threading._shutdown``, where python runs them, and an exception is
# printed as python prints it there (NOTE [An exception while the program's threads are joined] in runner.py). A
# signal during the report's build runs its handler once the report is written (NOTE [The program's own handler of a
# held signal while the report is built]).

# NOTE [Signal handlers while the report is built]
# Once the program's main code has ended, what runs until the interpreter's own exit is tensorscope's
# (stopping the instrumentation, joining the program's threads, the report), where under python the
# interpreter is shutting down. A program's handler
# (its own SIGUSR1/SIGALRM handler, torch's SIGCHLD handler of a DataLoader whose worker died) used to run
# there, at the next bytecode of the report's build, and its exception ended the build (exit 4, "internal
# error", no report: measured) or, raised inside one of the build's loops that catch Exception, was dropped
# with part of the report. Under python
# such a handler runs, if at all, inside the interpreter's shutdown, where its exception is printed as
# ignored and the exit status stays the program's. So ``mute_program`` makes every Python-level handler but
# the held signals' do nothing while the report is built (the signals that come then are noted); ``release``
# puts them back in the interpreter's own call of ``threading._shutdown``, before the program's atexit
# callbacks, and the noted signals run their handlers there (faults21: NOTE [The program's own handler of a
# held signal while the report is built]), so the program's own atexit handlers run with them, as under
# python, and a raise there is python's "Exception ignored in atexit callback" (tests/test_timeout_ends.py).

# NOTE [The program's own handler of a held signal while the report is built]
# (faults21.) SIGINT, SIGTERM and SIGHUP are held while the report is built (``HeldSignals``): at python's default
# (SIGINT's KeyboardInterrupt, SIGTERM's and SIGHUP's death) the first is kept for ``release`` to die by once the
# report is written, and a second ends the process at once. A program that set its own handler for one of them
# (a graceful stop on Ctrl-C or SIGTERM) got the same: under ``run`` it died by the signal after the report (exit
# 130 or 143 where python exits 0), and a second one (a user's second Ctrl-C while a long report is built) killed
# the process at once, with no report. Under python that handler runs in the interpreter's shutdown, if the signal
# comes before the process is gone, and the exit status stays the program's; its exception is printed as ignored.
# So such a signal is noted as a muted handler's is (``_hold``), never held nor a death; ``release`` leaves
# ``_nothing`` in its place too, and ``at_shutdown`` (runner._handlers_at_shutdown) puts all the program's handlers
# back inside the interpreter's own call of ``threading._shutdown`` (a replacement of it, made at ``release``, that
# puts the original back and calls it): the first Python code python runs at its exit, before the atexit
# callbacks. There each noted signal is raised again in a frame compiled under threading.py's name at
# ``_shutdown``'s wait line (as the joins' ``_shutdown_wait``), so the handler's ``frame`` and an exception's
# traceback are those python's shutdown gives, and the exception goes to ``sys.unraisablehook`` as there
# ("Exception ignored in: <module 'threading' ...>"). Between ``release`` and that call only tensorscope's code
# runs (the exit status, ``sys.exit``): a handler put back at ``release`` could have run there, in tensorscope's
# frames. The same holds for every muted handler's signal (a SIGUSR1, a SIGCHLD) that comes while the report is
# built: run at the shutdown, not dropped. Measured (tests/test_timeout_ends.py: ``run --json`` blocked writing a
# report bigger than the pipe, two SIGINTs and a SIGTERM sent meanwhile): before, death by SIGINT with no report;
# now exit 0, the report whole, the handler run with its exception printed as ignored, as python prints it in its
# shutdown. A signal whose handler is python's own (or SIG_DFL) is held as before.


class HeldSignals:
    """Hold SIGINT, SIGTERM and SIGHUP while the report is written (main thread only).

    The first one is kept in ``pending`` for ``release`` to die by; a second one ends the
    process at once. Signals the program's environment ignores (``nohup``) stay ignored.
    """

    def __init__(self, real_exit=os._exit, mute: bool = False, at_shutdown=None):
        self.pending: int | None = None
        self._at_shutdown = at_shutdown  # faults21: runs the handlers of the signals noted meanwhile (release)
        self._interruptible = False
        self._real_exit = real_exit
        self._previous = {}
        self._muted = {}  # the program's handlers while the report is built (mute_program)
        self._back = None  # those put back while the program's threads are joined (interruptible)
        if mute:
            self.mute_program()
        for s in HELD:
            try:
                if _getsignal(s) == signal.SIG_IGN:
                    continue
                self._previous[s] = unguarded(s, _signal(s, self._hold))  # the run is over: the program's own
            except (ValueError, OSError):  # not the main thread
                pass

    def _hold(self, signum, frame):
        if self._interruptible and self.pending is None:
            own = self._previous.get(signum)
            if _programs_handler(own):  # NOTE [The program's handlers while its threads are joined]
                return own(signum, frame)
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.pending = signum  # the program's threads still run: the report, then death by it
            raise Stopped(signum)
        if _programs_handler(self._previous.get(signum)):  # faults21: NOTE [The program's own handler of a
            _nothing(signum, frame)  # held signal while the report is built]: noted, run once it is written
            return
        if self.pending is not None:
            die_by(signum, self._real_exit)
        self.pending = signum

    def mute_program(self) -> None:
        """The program's Python-level handlers do nothing until ``release`` (NOTE [Signal handlers while the
        report is built]); tensorscope's own (``tensorscope_own``: --timeout's) go on. A handler whose signal
        came a moment before runs at a bytecode of this loop, and its exception is dropped as the muting goes
        on (python is shutting down there)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for _ in range(64):
            try:
                for s in signal.valid_signals():
                    if s in HELD or s in self._muted:
                        continue
                    h = _getsignal(s)
                    if callable(h) and h is not _nothing and not getattr(h, "tensorscope_own", False):
                        _signal(s, _nothing)
                        self._muted[s] = unguarded(s, h)
                return
            except BaseException:
                continue

    @contextlib.contextmanager
    def interruptible(self):
        """While the program's threads are joined: the program's own handlers run (NOTE [The program's handlers
        while its threads are joined]); else Ctrl-C raises KeyboardInterrupt, SIGTERM and SIGHUP raise ``Stopped``
        (the report is then written and the process dies by it)."""
        back = {}
        if threading.current_thread() is threading.main_thread():
            for s, h in self._muted.items():
                try:
                    if _getsignal(s) is _nothing:
                        _signal(s, h)
                        back[s] = h
                except (ValueError, OSError, TypeError, RuntimeError):
                    pass
        self._interruptible = True
        self._back = back
        try:
            yield
        finally:
            self._interruptible = False
            self._back = None
            for s in back:  # muted again for the report's build
                try:
                    if _getsignal(s) is back[s]:
                        _signal(s, _nothing)
                except (ValueError, OSError, TypeError, RuntimeError):
                    pass

    def replay(self) -> None:
        """Inside ``interruptible``: each signal the muted handlers noted since the program ended runs its
        program's handler now (NOTE [The program's handlers while its threads are joined])."""
        back = getattr(self, "_back", None)
        if back is None:
            return
        came = [s for s in _CAME if s in back or _programs_handler(self._previous.get(s))]  # faults21: held ones
        _CAME.clear()
        held = self.pending
        if held is not None and _programs_handler(self._previous.get(held)):
            self.pending = None  # a held signal the program has a handler for: it runs now (``_hold``)
            came.append(held)
        for s in came:
            signal.raise_signal(s)

    def release(self) -> None:
        """Put the handlers back; die by the signal held meanwhile, if one came. The program's own handlers (those
        muted, and its own of the held signals) come back at the interpreter's shutdown (``at_shutdown``), where
        the signals noted meanwhile run them (faults21: NOTE [The program's own handler of a held signal while the
        report is built])."""
        previous, self._previous = self._previous, {}
        muted, self._muted = self._muted, {}
        later = dict(muted)
        for s, h in previous.items():
            if getattr(h, "tensorscope_default", False):  # the run is over: its handler stood for SIG_DFL
                h = signal.SIG_DFL
            elif self._at_shutdown is not None and _programs_handler(h):  # faults21: noted until the shutdown
                later[s], h = h, _nothing
            try:
                _signal(s, h if h is not None else signal.SIG_DFL)
            except (ValueError, OSError, TypeError):
                later.pop(s, None)
        if self.pending is not None:  # the program is over: python would have flushed its output
            die_by(self.pending, self._real_exit, flush=True)
        if later:
            if self._at_shutdown is not None:
                self._at_shutdown(later)
            else:
                import atexit

                atexit.register(_unmute, later)  # NOTE [Signal handlers while the report is built]


def noted(signals) -> list:
    """The signals among ``signals`` that came for a muted handler since the program's threads were joined, taken
    (faults21: NOTE [The program's own handler of a held signal while the report is built])."""
    came = [s for s in _CAME if s in signals]
    _CAME.clear()
    return came


def _unmute(muted: dict) -> None:
    """The program's handlers again (NOTE [Signal handlers while the report is built])."""
    for s, h in muted.items():
        try:
            if _getsignal(s) is _nothing:
                _signal(s, h)
        except (ValueError, OSError, TypeError, RuntimeError):
            pass


def interpreter_exit_text(code: int) -> None:
    """What this interpreter prints on stderr when it exits by ``sys.exit(code)`` for an int beyond a
    C long, printed on stderr by ``explain``, which exits with its own status (NOTE [A status beyond a
    C long] in runner.py: the text is the interpreter's own, by release). A fresh interpreter of the
    same executable exits that way and its stderr is passed on: nothing else is asked of it."""
    import subprocess

    try:
        _flush()
        done = subprocess.run([sys.executable, "-I", "-S", "-c", f"import threading, sys; sys.exit({int(code)})"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=300)
        if done.stderr:
            os.write(2, done.stderr)
    except Exception:  # no text rather than a crash: the exit status is explain's anyway
        pass
