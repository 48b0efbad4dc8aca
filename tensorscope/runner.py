"""Running a program exactly as ``python prog.py ARGS`` would, under instrumentation.

The program gets ``__name__ == "__main__"``, its own ``sys.argv``, its folder as
``sys.path[0]``, a fresh ``__main__`` module, and python's own handling of
``SystemExit``, uncaught exceptions (through ``sys.excepthook``, with
tensorscope's frames removed) and ``KeyboardInterrupt``. ``-m module`` runs through runpy
exactly as ``python -m module`` (see NOTE [python -m]).
"""

from __future__ import annotations

import builtins
import contextlib
import functools  # faults21
import importlib.machinery
import opcode
import os
import runpy
import signal
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field

from tensorscope import children, exits
from tensorscope.instrument.frames import is_tensorscope_file
from tensorscope.instrument.frames import strip_traceback


class ProgramTimeout(BaseException):
    """Raised in the program's main thread when --timeout expires."""


@dataclass
class Outcome:
    exit_status: int = 0
    exception: BaseException | None = None
    interrupted: bool = False
    timed_out: bool = False
    os_exit: bool = False  # the program called os._exit
    exit_code: int | None = None  # sys.exit's int when it does not fit a C long: tensorscope exits with it
    signal: int | None = None  # the signal that ended the program (SIGTERM, SIGHUP)
    forked_child: bool = False  # run returned in a process forked from the one that started it
    children: list = field(default_factory=list)  # children.Child: the processes the program started
    held: exits.HeldSignals | None = field(default=None, repr=False)  # released once the report is written
    main_globals: dict | None = field(default=None, repr=False)


# NOTE [A wrapper's frame behind a library's traceback entry]
# A wrapper's own traceback entry is unlinked (NOTE [Invisible frames] in patches.py), but an entry below it
# stays: the library frame that raised (``torch.cuda._lazy_init`` raising "Torch not compiled with CUDA enabled"
# under ``x = torch.randn(4, 3).to("cuda")``). That frame's ``f_back`` is the wrapper's frame, finished but kept
# by it with its locals: the call's arguments, the program's tensors. Under python the caller's frame was the
# ``f_back`` and its value stack, which held the receiver, was emptied as the exception left it, so the tensor
# died; under the pure-Python wrappers it stayed alive to the end of the run (``alive`` true in the report, false
# with the compiled wrapper, which has no frame: tests/corpus/device_cuda_input_cpu_model.py). So once the
# program's exception has left it, each finished frame of tensorscope's reached by ``f_back`` from a frame of the
# traceback is cleared (``frame.clear()``: its locals go; an executing frame, the runner's, refuses and is left;
# generator and coroutine frames are not touched, clearing a suspended one would close it). The program can see
# it too, before its exception leaves it: a program that keeps the exception (``except ... as e: err = e``) kept
# the wrapper's frame and the tensors with it, so the op wrapper (instrument/calls.py ``call``) deletes its
# arguments before its bare ``raise``; the other wrappers (patches.py) do not yet, and their frames are released
# here only.
_CO_SUSPENDABLE = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR


def _release_wrapper_frames(exc: BaseException) -> None:
    """Clear tensorscope's finished frames behind the traceback's entries (NOTE [A wrapper's frame behind a
    library's traceback entry])."""
    tb, n = exc.__traceback__, 0
    while tb is not None and n < 256:
        f, up = tb.tb_frame.f_back, 0
        while f is not None and up < 64:
            code = f.f_code
            if is_tensorscope_file(code.co_filename) and not code.co_flags & _CO_SUSPENDABLE:
                try:
                    f.clear()
                except RuntimeError:  # still executing: the runner's own frames, nothing further up is finished
                    break
            f, up = f.f_back, up + 1
        tb, n = tb.tb_next, n + 1


def _strip_chain(exc: BaseException) -> None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        strip_traceback(exc)
        try:
            _release_wrapper_frames(exc)
        except Exception:
            pass
        growth = sys.modules.get("tensorscope.instrument.growth")  # imported with torch, not before
        if growth is not None:  # NOTE [Python's traceback under the global forward hook] in growth.py
            growth.python_call_entries(exc)
        if isinstance(exc, RecursionError):
            _drop_unstarted_frame(exc)
        for linked in (exc.__cause__, exc.__context__):
            if linked is not None and id(linked) not in seen:
                _strip_chain(linked)
        exc = None


_RESUME = opcode.opmap.get("RESUME")  # Python 3.11 and later


def _drop_unstarted_frame(exc: RecursionError) -> None:
    """Drop the innermost entry of a RecursionError raised at a frame's start by a line event's callback.

    See NOTE [Recursion depth under line events]: under python that frame is never made.
    """
    tb = exc.__traceback__
    if tb is None or _RESUME is None:
        return
    prev = None
    while tb.tb_next is not None:
        prev, tb = tb, tb.tb_next
    try:
        unstarted = tb.tb_frame.f_code.co_code[tb.tb_lasti] == _RESUME
    except (IndexError, AttributeError):
        return
    if unstarted and prev is not None:
        prev.tb_next = None


# NOTE [A status beyond a C long]
# Python exits 255 for ``sys.exit(n)`` when n does not fit a C long, and what it prints then is the
# interpreter's own, by release (measured with ``python -c 'import threading, sys; sys.exit(2**70)'``):
# nothing on 3.10 and 3.11; "OverflowError: Python int too large to convert to C long" on 3.12.1;
# on 3.13.0 "Exception ignored on threading shutdown:" and then, with threading imported, a traceback
# from threading._shutdown ending "SystemError: <method 'is_done' of '_thread._ThreadHandle' objects>
# returned a result with an exception set" (the OverflowError is still set when threading shuts down).
# So tensorscope keeps that int (Outcome.exit_code) and ends with ``sys.exit`` of it once the report is
# written: the interpreter then prints and exits exactly as python does. The report says 255.
# ``explain`` exits with its own status; it prints the text a fresh interpreter of the same executable
# prints for that exit (exits.interpreter_exit_text), so its stderr is python's too.


def _exit_status(code) -> int:
    """Python's handling of ``SystemExit(code)``: an int beyond a C long exits 255, as python's -1
    (see NOTE [A status beyond a C long])."""
    if code is None:
        return 0
    if isinstance(code, int):  # bool too
        return code & 0xFF if -(1 << 63) <= code < (1 << 63) else 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def main_filename(path: str) -> str:
    """The ``__file__`` and code filename python gives a script: made absolute by joining the cwd."""
    if path == "-":
        return "<stdin>"
    if os.path.isabs(path):
        return path
    return os.getcwd() + os.sep + path


def compile_program(source: bytes, filename: str):
    """Compile like the interpreter does at start-up; raises SyntaxError with python's own wording.

    The interpreter's tokenizer reads the file line by line: the first line holding a NUL
    byte or, without a coding cookie, bytes that are not UTF-8, decides the error.
    """
    import io
    import tokenize

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = "utf-8"  # undecodable before any coding cookie: python reads it as UTF-8
    check_utf8 = encoding in ("utf-8", "utf-8-sig")
    start = 0
    lineno = 1
    while start < len(source):
        end = source.find(b"\n", start)
        end = len(source) if end < 0 else end + 1
        line = source[start:end]
        if check_utf8:
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise SyntaxError(
                    f"Non-UTF-8 code starting with '\\x{line[e.start]:02x}' in file {filename} on line "
                    f"{lineno}, but no encoding declared; see https://peps.python.org/pep-0263/ for details"
                ) from None
        nul = line.find(b"\0")
        if nul >= 0:
            text = line[:nul].decode("utf-8", "replace")
            raise SyntaxError("source code cannot contain null bytes", (filename, lineno, None, text))
        start = end
        lineno += 1
    return compile(source, filename, "exec", dont_inherit=True)


# traceback.walk_stack(None) starts this many frames above its own (generator) frame: python's own
# walk_stack does the same, so that extract_stack/print_stack start at their caller.
_WALK_STACK_START = 4


def _walk_stack(f):
    """``traceback.walk_stack`` that ends at the program's outermost frame (see NOTE [Invisible frames]).

    Under plain python the program's ``<module>`` frame is the bottom of the stack; under
    tensorscope the runner and the command line lie below it. Anything that formats the
    current stack (``traceback.print_stack``, logging's ``stack_info``, anomaly mode's
    forward traceback) must not show them.
    """
    if f is None:
        f = sys._getframe(_WALK_STACK_START)
    while f is not None:
        if is_tensorscope_file(f.f_code.co_filename):
            if f.f_code is _execute.__code__:
                return
        else:
            yield f, f.f_lineno
        f = f.f_back


def run(code, *, path: str, argv: list[str], timeout: float | None, on_start=None, on_end=None,
        module: str | None = None, on_abrupt_end=None) -> Outcome:
    """Execute compiled program code as ``__main__``; never raises for the program's own errors.

    With ``module``, ``code`` is None and the module runs as ``python -m module`` runs it:
    see NOTE [python -m]. Each change to the interpreter is one context manager below, undone in
    reverse order when the program ends. ``on_end()`` runs when the program stops (instrumentation
    off); ``on_abrupt_end(outcome)`` writes the report when the program ends the process itself
    (``os._exit``, SIGTERM, SIGHUP: see NOTE [Ending as python ends]) and returns the exit status
    to end with instead of the program's, or None.
    """
    outcome = Outcome()
    real_os_exit = os._exit
    with contextlib.ExitStack() as stack:
        main = stack.enter_context(main_module(path, module))
        stack.enter_context(program_argv(path, argv, module))
        stack.enter_context(program_path0(path, module))
        watch = stack.enter_context(children.watched())
        ending = exits.Ending(_abrupt_report(main, watch, on_end, on_abrupt_end), real_os_exit)
        stack.enter_context(exits.os_exit_reports(ending, real_os_exit))
        stack.enter_context(exits.fatal_signals_report(ending, _program_returned))
        # --timeout, on until the program's threads are joined (NOTE [--timeout ends the run])
        timer = stack.enter_context(Alarm(timeout, ending))
        stack.callback(_flush)
        stack.callback(_join_threads, outcome, timer)  # as the interpreter does before exiting (os._exit still reports)
        stack.enter_context(python_excepthook())
        limit = stack.enter_context(_RecursionLimit())
        stack.enter_context(program_stack())
        try:
            try:
                timer.start()
                if on_start is not None:
                    on_start()
                _execute(code, main, module, limit)
            finally:
                # From here on what runs is tensorscope's (and the program's threads, joined below):
                # signals wait for the report (see NOTE [Ending as python ends]).
                timer.program_ended()
                # the program's handlers do nothing from here until the interpreter's threading._shutdown
                # (NOTE [Signal handlers while the report is built] in exits.py)
                outcome.held = exits.HeldSignals(real_os_exit, mute=True,
                                                 at_shutdown=_handlers_at_shutdown)  # faults21
                if on_end is not None:
                    on_end()
        except SystemExit as e:
            outcome.exit_status = _exit_status(e.code)
            if outcome.exit_status == 0xFF and isinstance(e.code, int) and not -(1 << 63) <= e.code < (1 << 63):
                outcome.exit_code = e.code  # NOTE [A status beyond a C long]
        except ProgramTimeout as e:
            outcome.timed_out = True
            outcome.exit_status = 124
            outcome.exception = e
        except KeyboardInterrupt as e:
            _strip_chain(e)
            outcome.exception = e
            outcome.interrupted = True
            outcome.exit_status = 130
            _print_exception(e)
        except BaseException as e:  # the program's own uncaught exception
            _strip_chain(e)
            outcome.exception = e
            outcome.exit_status = 1
            _print_exception(e)
        outcome.main_globals = main.__dict__
    outcome.forked_child = ending.in_child()
    outcome.children = watch.children()
    return outcome


def _execute(code, main, module, limit) -> None:
    """Run the program: the bottom of its stack (``_walk_stack`` ends here)."""
    probe: dict = {}
    # at the depth the program's code runs at, as the program's own code (NOTE [Recursion depth under line events])
    filename = code.co_filename if code is not None else "<stdin>"
    exec(_probe(filename), probe)
    limit.calibrate(probe["depth"], filename)
    if module is not None:
        # NOTE [python -m]
        # `python -m name` is runpy._run_module_as_main(name): it finds the module (importing
        # its parent packages; a package runs its __main__), puts the module's file in argv[0],
        # sets __name__, __file__, __spec__, __package__, __loader__, __cached__ in the __main__
        # module installed by main_module, and exits with "<python>: No module named x" (status 1)
        # when the lookup fails. Calling that same function gives python's semantics, error texts and
        # the two "<frozen runpy>" frames of its tracebacks; it is called from here directly so
        # the program runs at the depth it has under python -m (see _RecursionLimit).
        runpy._run_module_as_main(module)
    else:
        exec(code, main.__dict__)


def _program_returned(frame) -> bool:
    """Whether the program's main code has returned (or raised) while ``frame`` runs in the main thread: no frame
    called by ``_execute`` lies under it (NOTE [A signal between the program's end and the muting] in exits.py)."""
    bottom = _execute.__code__
    while frame is not None:
        back = frame.f_back
        if back is not None and back.f_code is bottom:
            return False
        if frame.f_code is bottom:
            return True
        frame = back
    return True


def _abrupt_report(main, watch, on_end, on_abrupt_end):
    """The report of a program that ends the process itself: ``report(status, signum)`` for exits.Ending."""

    def report(status, signum, timed_out=False):
        signal.setitimer(signal.ITIMER_REAL, 0)  # --timeout must not stop the report
        if on_end is not None:
            on_end()
        outcome = Outcome(exit_status=status & 0xFF if signum is None else 128 + signum,
                          os_exit=signum is None and not timed_out, timed_out=timed_out, signal=signum,
                          main_globals=main.__dict__, children=watch.children())
        return None if on_abrupt_end is None else on_abrupt_end(outcome)

    return report


@contextlib.contextmanager
def main_module(path: str, module: str | None):
    """A fresh ``__main__`` module, with the keys python gives it in the same order, for the run."""
    main = types.ModuleType("__main__")
    g = main.__dict__
    g["__annotations__"] = {}
    g["__builtins__"] = builtins
    if module is not None:
        pass  # runpy sets __file__, __loader__, __spec__, __package__ once the module is found
    elif path == "-":
        g["__loader__"] = importlib.machinery.BuiltinImporter
        g["__file__"] = "<stdin>"
    else:
        g["__loader__"] = importlib.machinery.SourceFileLoader("__main__", main_filename(path))
        g["__file__"] = main_filename(path)
    if module is None:
        g["__cached__"] = None
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        yield main
    finally:
        sys.modules["__main__"] = saved


@contextlib.contextmanager
def program_argv(path: str, argv: list[str], module: str | None):
    """``sys.argv`` as python gives it (runpy puts the module's file in argv[0] under -m)."""
    saved = sys.argv
    sys.argv = ["-m" if module is not None else path, *argv]
    try:
        yield
    finally:
        sys.argv = saved


@contextlib.contextmanager
def program_path0(path: str, module: str | None):
    """``sys.path[0]``: the script's folder, "" for stdin, the working directory under -m.

    NOTE [python -P]
    Under ``python -P`` or ``PYTHONSAFEPATH`` (``sys.flags.safe_path``, Python 3.11+) python puts nothing in
    front of ``sys.path`` for a script, stdin or ``-m``: the script's folder is not importable. tensorscope's own
    start (``python -P -m tensorscope``, or the ``tensorscope`` script under PYTHONSAFEPATH) got the same flag, so
    nothing was put there for it either, and ``sys.path[0]`` is whatever came first (a PYTHONPATH entry, or the
    standard library's zip): it is left alone, as python leaves it. (It used to be replaced by the script's
    folder: the program imported its siblings, which fail under python, and lost that entry.)
    """
    if getattr(sys.flags, "safe_path", False):
        yield
        return
    if module is not None:
        folder = os.getcwd()
    else:
        folder = "" if path == "-" else os.path.dirname(os.path.realpath(path))
    saved = sys.path[0] if sys.path else None
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if saved is not None and sys.path:
            sys.path[0] = saved


@contextlib.contextmanager
def python_excepthook():
    """Python's own ``sys.excepthook`` while the program runs (not a host's, such as IPython's)."""
    saved = sys.excepthook
    sys.excepthook = sys.__excepthook__
    try:
        yield
    finally:
        sys.excepthook = saved


@contextlib.contextmanager
def program_stack():
    """``traceback.walk_stack`` ends at the program's outermost frame (see ``_walk_stack``)."""
    saved = traceback.walk_stack
    traceback.walk_stack = _walk_stack
    try:
        yield
    finally:
        traceback.walk_stack = saved


# NOTE [--timeout ends the run]
# ``--timeout N`` raises ProgramTimeout in the program's main thread N seconds into its own time (torch's
# import and the install are not counted: session.py pauses the timer meanwhile). A CI run hung 13 minutes in
# ``run --timeout 2`` of a training loop (tests/programs/forever_loop.py) with a one-shot timer. Found since
# (tests/test_timeout_ends.py):
# - where the handler of a signal runs is wherever the main thread next runs Python code, and under
#   tensorscope that is often tensorscope's own: the wrappers, and the weak reference callback that forgets a
#   dead tensor's id (recorder.py), which CPython calls with any exception it raises printed as "Exception
#   ignored in: <function _forgetter.<locals>.forget ...>" and dropped. Measured on forever_loop.py, 2,000
#   expiries every 0.7 ms: 0.4 % ran inside ``forget``; one ProgramTimeout raised there was printed as
#   ignored and the program ran on (until killed). Inside a wrapper it would stop tensorscope's own
#   bookkeeping half way. So an expiry whose handler runs in a frame of tensorscope's is moved RETRY
#   later, up to RETRIES times, and raised in the program's code or the library's;
# - a program that catches BaseException (a loop's ``except BaseException: continue``), or whose cleanup
#   after it outlasts GRACE, and a program's non-daemon thread that never ends (its main thread raised
#   ProgramTimeout, and the threads are joined as the interpreter would: for ever) kept the run going.
#   So ProgramTimeout is raised once (the program's ``finally`` blocks run, as after Ctrl-C), and GRACE
#   seconds later, if the program or its threads still run, the run is ended as SIGTERM ends it
#   (NOTE [Ending as python ends] in exits.py): the report is written, with the --timeout note, and the
#   process exits 124. The same once the program's main code has returned while its threads still run
#   when the N seconds are up. Nothing is raised a second time inside the program's cleanup;
# - torch's import found by ``importlib.util.find_spec("torch")`` first used to leave the timer paused for
#   ever (NOTE [Instrumenting at the program's import of torch] in torch_import.py).


class Alarm:
    """--timeout (NOTE [--timeout ends the run]). ``ending``: exits.Ending, the hard end after GRACE."""

    RETRY = 0.002  # seconds: an expiry in tensorscope's own code is moved this much later
    RETRIES = 500  # at most so many times in a row (one second): then raised wherever it lands
    GRACE = 2.0  # seconds the program (and its threads) may take to stop after ProgramTimeout

    def __init__(self, timeout: float | None, ending):
        self.timeout = timeout
        self.ending = ending
        self.stage = "off"  # "program", "raised" (ProgramTimeout raised), "after" (tensorscope's), "joining"
        self.retries = 0
        self._saved = None

    def __enter__(self):
        if self.timeout:
            self._saved = signal.signal(signal.SIGALRM, self._on_alarm)
        return self

    def __exit__(self, *exc):
        if self.timeout:
            self.stage = "off"
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._saved)
        return False

    def start(self) -> None:
        if self.timeout:
            self.stage = "program"
            signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def program_ended(self) -> None:
        """The program's main code returned or raised: tensorscope's code runs, then the threads are joined."""
        if self.stage != "off":
            self.stage = "after"

    @contextlib.contextmanager
    def joining(self):
        """The program's threads are joined: an expiry ends the run."""
        if self.stage == "off":
            yield
            return
        self.stage = "joining"
        try:
            yield
        finally:
            self.stage = "after"

    def _on_alarm(self, signum, frame):
        stage = self.stage
        if stage == "joining":
            self._end()
        ours = frame is not None and is_tensorscope_file(frame.f_code.co_filename)
        if stage == "after" or (ours and self.retries < self.RETRIES):
            self.retries += stage != "after"
            signal.setitimer(signal.ITIMER_REAL, self.RETRY)
            return
        self.retries = 0
        if stage == "raised":  # the program did not stop within GRACE (it caught it, or cleans up)
            self._end()
        elif stage == "program":
            self.stage = "raised"
            signal.setitimer(signal.ITIMER_REAL, self.GRACE)
            raise ProgramTimeout()

    _on_alarm.tensorscope_own = True  # not the program's: HeldSignals.mute_program leaves it

    def _end(self) -> None:
        """Write the report and exit 124, as SIGTERM ends a run (never returns)."""
        self.stage = "off"
        signal.setitimer(signal.ITIMER_REAL, 0)
        _flush()  # what the program printed: it is stopped, as by ProgramTimeout, not killed
        self.ending.end(status=124, timed_out=True)


# NOTE [Recursion depth under line events]
# From Python 3.12 the recursion limit counts Python frames only, and a ``sys.monitoring`` callback
# written in Python is one more frame on top of the frame whose event it hears. The line record
# (NOTE [Forward lines from line events]) hears PY_START and every LINE of the program's own code, so
# the program's deepest frame needs room for a callback above it. Measured with
# tests/programs/recursion_limit.py (limit 2000): RecursionError at depth 1996 under ``run`` against
# 1998 under python, on 3.13.0 x torch 2.15.0 and 3.12.1 x 2.9.1 alike, raised in the PY_START
# callback at its ``co_filename not in self.user`` (a second frame, ``UserCode.__contains__``): two
# levels. The op wrappers had no part in it (``t + 1`` is torch's C method under ``run``). So:
# - the callbacks are one frame deep (the cached verdict is read from its dict; a call into Python
#   only for a file seen the first time);
# - the depth probe is compiled as a file of the program's own, so the callbacks hear it as they hear
#   the program, and the limit is raised by what they cost: measured, not counted (nothing on 3.10 and
#   3.11, nor where no tool id is free). The program's functions then recurse as deep as under python
#   (1998 and 1998 on 3.12 and 3.13; 1996 and 1996 on 3.11, whose C calls count too). When the
#   callbacks go in later, at the program's own ``import torch``, the limit is raised then by what
#   they cost (NOTE [Line callbacks installed inside the program]).
# What stays different: the frame one past python's deepest is made, and the RecursionError comes
# from the callback at its start instead of from the call. A program that catches it finds one more
# entry at the end of ``__traceback__`` (that function's ``def`` line); an uncaught one is printed
# without it (``_drop_unstarted_frame``: an entry stopped at its RESUME, where under python no
# RecursionError is raised). And a library's Python function (DISABLEd: no callbacks) called at the
# very deepest level gets one level more than under python (a probe that is not the program's code:
# 999 against 998). While the saved-tensor watch runs (NOTE [Watching exposed saved bytes]) its
# callbacks are deeper and the program gets fewer levels; that is not made up for.
_PROBE_SOURCE = "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\n" \
    "depth = f(1)\n"
_PROBE_HEADROOM = 200


def _probe(filename: str):
    """The depth probe, compiled as a file of the program's own (see NOTE [Recursion depth under line events]).

    With ``run -m`` the module's file is not known before runpy finds it: ``<stdin>`` is the
    program's own code to every tool that tells the program's code from a library's (frames.UserCode).
    """
    return compile(_PROBE_SOURCE, filename, "exec")


class _RecursionLimit:
    """Give the program the recursion depth it has under plain python.

    The runner and the command line lie below the program's ``<module>`` frame; the limit
    is raised by their depth, and ``sys.getrecursionlimit``/``setrecursionlimit`` are
    shifted by the same amount, so the program sees and sets the numbers it would see.
    """

    def __enter__(self):
        self.get, self.set = sys.getrecursionlimit, sys.setrecursionlimit
        self.saved = self.get()
        self.set(self.saved + _PROBE_HEADROOM)
        self.offset = None  # set by calibrate
        self.filename = "<stdin>"
        _LIMITS.append(self)
        return self

    def calibrate(self, probe_depth: int, filename: str) -> None:
        """Shift the limit by the depth below the program, measured by ``_probe`` at the program's depth."""
        # Measured, not counted: C-level calls (exec, typer/click) use recursion levels too.
        # Under plain python a module-level function can recurse `limit - 1` deep.
        self.offset = (self.saved + _PROBE_HEADROOM - 1) - probe_depth
        self.filename = filename
        real_get, real_set = self.get, self.set

        def getrecursionlimit():
            return real_get() - self.offset

        def setrecursionlimit(limit):
            if not isinstance(limit, int):
                return real_set(limit)
            if limit < 1:
                return real_set(limit)  # the same ValueError as python
            return real_set(limit + self.offset)

        getrecursionlimit.__doc__ = real_get.__doc__
        setrecursionlimit.__doc__ = real_set.__doc__
        real_set(self.saved + self.offset)
        sys.getrecursionlimit, sys.setrecursionlimit = getrecursionlimit, setrecursionlimit

    def room(self):
        """How deep the probe recurses from the caller's frame (None where it cannot be measured).
        See NOTE [Line callbacks installed inside the program]."""
        try:
            deepest = max(_frame_depth(frame) for frame in sys._current_frames().values())
        except Exception:
            return None
        saved = self.get()
        try:
            if deepest + _ROOM_PROBE < saved:  # a program's huge limit costs no deep probe
                self.set(deepest + _ROOM_PROBE)
        except Exception:
            return None
        try:
            probe: dict = {}
            exec(_probe(self.filename), probe)
            return probe["depth"]
        except Exception:
            return None
        finally:
            self.set(saved)

    def shift(self, levels: int) -> None:
        """Give the program ``levels`` more: what line callbacks installed after ``calibrate`` cost."""
        self.offset += levels
        self.set(self.get() + levels)

    def __exit__(self, *exc):
        sys.getrecursionlimit, sys.setrecursionlimit = self.get, self.set
        self.set(self.saved)
        try:
            _LIMITS.remove(self)
        except ValueError:
            pass


_LIMITS: list = []  # the _RecursionLimit of the run in progress
_ROOM_PROBE = 1000  # levels above the deepest thread for room()'s probe, at most


def _frame_depth(frame) -> int:
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


# NOTE [Line callbacks installed inside the program]
# When torch is not imported before the program, the line record (NOTE [Forward lines from line
# events]) is installed inside the program's own ``import torch`` (NOTE [Instrumenting at the
# program's import of torch] in torch_import.py), after ``_execute``'s probe measured the program's
# depth without its callbacks. On Python 3.12 and later each of the program's frames then needs one
# level more for the callback above it: tests/programs/recursion_limit.py stopped at depth 1997
# under ``run`` against 1998 under python on 3.12.1 x 2.9.1 and 3.13.0 x 2.15.0 (1998 when torch
# was imported before the program, by sitecustomize or a driver). So the install is bracketed by
# ``depth_kept``: ``room()`` measures the probe, compiled as the program's file, from the same frame
# before and after it, and the limit is raised by the difference. A program's limit of 10**6 costs no
# million-frame probe: the limit is lowered for the probe to 1,000 above the deepest thread's stack
# (a thread that runs on during the probe and recurses 1,000 deeper in that time would meet a
# RecursionError early; a limit within 1,000 of the deepest stack is never lowered). Only where the callbacks are
# ``sys.monitoring``'s: a trace function that a RecursionError reaches is switched off by the
# interpreter, so with one set (the program's, or tensorscope's own settrace watch) nothing is probed.
@contextlib.contextmanager
def depth_kept():
    """Around installing the instrumentation inside the running program: the program keeps python's
    recursion depth (see NOTE [Line callbacks installed inside the program])."""
    limit = _LIMITS[-1] if _LIMITS else None
    if limit is None or limit.offset is None or getattr(sys, "monitoring", None) is None or sys.gettrace() is not None:
        yield
        return
    before = limit.room()
    try:
        yield
    finally:
        if before is not None and sys.gettrace() is None:
            after = limit.room()
            if after is not None and after < before:
                limit.shift(before - after)


def _print_exception(e: BaseException) -> None:
    _flush()
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except Exception:
        traceback.print_exception(type(e), e, e.__traceback__)
    _flush()


def _join_threads(outcome: Outcome, timer: Alarm | None = None) -> None:
    """Wait for non-daemon threads, as the interpreter does before exiting.

    Like ``threading._shutdown``, first run the callbacks registered with
    ``threading._register_atexit``: they tell concurrent.futures' worker threads (torch.compile's
    compile workers, a program's ThreadPoolExecutor) to finish, and joining those threads without
    them waits forever. They are run once: the interpreter's own shutdown then finds none left.
    SIGTERM or SIGHUP meanwhile stops the waiting: the report is written and the process dies by it
    (the threads are the program's, still running: NOTE [Ending as python ends]). --timeout too.
    """
    with timer.joining() if timer is not None else contextlib.nullcontext():
        _join_others(outcome)


def _join_others(outcome: Outcome) -> None:
    main = threading.main_thread()
    others = [t for t in threading.enumerate()
              if t is not main and not t.daemon and t is not threading.current_thread()]
    if not others and not exits.signals_noted():  # nothing to wait for, no handler of the program's to run
        return
    callbacks = getattr(threading, "_threading_atexits", None)
    if callbacks and others:
        pending = list(reversed(callbacks))
        callbacks.clear()
        for callback in pending:
            try:
                callback()
            except Exception:
                pass
    shutdown = _shutdown_wait()
    raised = None
    with outcome.held.interruptible() if outcome.held is not None else contextlib.nullcontext():
        for t in others or (None,):  # None: only the handlers of the signals noted since the program ended
            try:
                if shutdown is not None:
                    shutdown(_Wait(outcome, t))
                else:
                    _Wait(outcome, t).acquire()
            except exits.Stopped as e:  # SIGTERM, SIGHUP: the report, then death by it (HeldSignals.release)
                outcome.signal, outcome.exit_status = e.signum, 128 + e.signum
                return
            except BaseException as e:  # NOTE [An exception while the program's threads are joined]
                raised = e
                break
    if raised is not None:
        # printed once the program's handlers are muted again: a signal that came while it printed ran the
        # handler inside the print (the module's repr is Python code), and "<object repr() failed>" was printed
        # where python prints "<module 'threading' ...>" (a signal storm on a loaded machine, measured once)
        _ignored_at_shutdown(raised, shutdown)
        threading._shutdown = _abandon  # the threads still running are not waited for at the exit


def _abandon() -> None:
    """``threading._shutdown`` once a program's handler stopped the wait for its threads: python does not wait
    for them again (NOTE [An exception while the program's threads are joined])."""


# NOTE [An exception while the program's threads are joined]
# Under python the interpreter's shutdown calls ``threading._shutdown``, whose wait for the non-daemon threads
# runs the program's signal handlers (and python's SIGINT handler). An exception raised there (a handler's own,
# its ``sys.exit``, a Ctrl-C's KeyboardInterrupt) stops the wait and goes to ``sys.unraisablehook``: python
# prints "Exception ignored in: <module 'threading' from '...'>" and a traceback whose first frame is
# ``_shutdown``'s ``lock.acquire()`` (3.10 to 3.12; 3.13.0 prints no header line and the frame is
# ``_thread_shutdown()``), the threads still running are abandoned, and the exit status is the program's:
# measured 0 for ``raise Boom``, ``sys.exit(3)`` and a Ctrl-C alike, on 3.10.13, 3.11.7, 3.12.1 and 3.13.0
# (the program's atexit callbacks still run; a thread still running is cut off at the exit, as a daemon).
# tensorscope joined silently (and a Ctrl-C exited 130). Now each join runs in a function compiled under
# threading.py's name at that line (``_shutdown_wait``: its text is the line's own, so the traceback shows
# python's line, with no carets), the exception's traceback keeps that frame and the program's (threading's
# join and tensorscope's frames dropped), and it goes to ``sys.unraisablehook`` as python sends it: the program's
# own hook, if it set one, gets it. The exit status stays the program's; the report is written; then
# ``threading._shutdown`` (which the interpreter calls at its exit) is one that does not wait. (On 3.10 to 3.12 an
# interrupted ``Thread.join`` marks the thread as stopped (bpo-45274's ``except`` in ``_wait_for_tstate_lock``
# releases its lock), so the exit did not wait for that one; 3.13's handle-based join does not, and printed
# "worker done" a second later where python had exited.) 3.13.0 shows only the handler's frame for a handler's
# exception and only ``_shutdown``'s for python's Ctrl-C: measured, and what the frames kept here give.


class _Wait:
    """``lock`` of ``threading._shutdown``'s ``lock.acquire()``: a signal noted since the program ended runs its
    handler (``HeldSignals.replay``), then the thread is joined."""

    def __init__(self, outcome: Outcome, thread: threading.Thread):
        self._outcome, self._thread = outcome, thread

    def acquire(self) -> None:
        if self._outcome.held is not None:  # a signal since the program ended: its handler now
            self._outcome.held.replay()
        if self._thread is not None:
            self._thread.join()

    def __call__(self) -> None:  # 3.13: ``_thread_shutdown()``
        self.acquire()


def _shutdown_wait():
    """A function ``_shutdown(lock)`` whose code is threading.py's, at ``_shutdown``'s wait line (None where the
    line is not found): its frame is the one python's traceback shows there."""
    try:
        import inspect

        lines, first = inspect.getsourcelines(threading._shutdown)
        for i, line in enumerate(lines):
            if line.strip() in ("lock.acquire()", "_thread_shutdown()"):
                text = line.rstrip("\n")
                name = line.strip().partition(".")[0].partition("(")[0]
                source = "\n" * (first + i - 2) + f"def _shutdown({name}):\n{text}\n"
                namespace: dict = {}
                exec(compile(source, threading.__file__, "exec"), namespace)
                return namespace["_shutdown"]
    except Exception:
        pass
    return None


# faults21
def _handlers_at_shutdown(handlers: dict) -> None:
    """The program's handlers (signal -> handler, muted while the report was built) come back in the interpreter's
    own shutdown, at its call of ``threading._shutdown``, before the program's atexit callbacks; each signal noted
    meanwhile runs its handler there, as python's ``threading._shutdown`` runs it (NOTE [The program's own handler
    of a held signal while the report is built] in exits.py)."""
    original = threading._shutdown

    def _shutdown():
        threading._shutdown = original
        _back_at_shutdown(handlers)
        return original()

    threading._shutdown = _shutdown


def _back_at_shutdown(handlers: dict) -> None:
    shutdown = None
    try:
        for signum, handler in handlers.items():
            if exits._getsignal(signum) is exits._nothing:
                exits._signal(signum, handler)
        came = exits.noted(handlers)
        if came:
            shutdown = _shutdown_wait()
        for signum in came:
            try:
                call = functools.partial(signal.raise_signal, signum)  # C: the handler's frame is the wait line's
                if shutdown is None:
                    call()
                elif shutdown.__code__.co_varnames[:1] == ("lock",):
                    shutdown(types.SimpleNamespace(acquire=call))
                else:  # 3.13: ``_thread_shutdown()``
                    shutdown(call)
            except BaseException as e:
                _ignored_at_shutdown(e, shutdown)
    except BaseException as e:  # a signal meanwhile: its handler ran here
        _ignored_at_shutdown(e, shutdown)
# end faults21


def _ignored_at_shutdown(e: BaseException, shutdown) -> None:
    """Give ``e`` to ``sys.unraisablehook`` as python's shutdown does (NOTE [An exception while the program's
    threads are joined])."""
    try:
        kept = []
        tb = e.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if (shutdown is not None and code is shutdown.__code__) or not (
                    code.co_filename == threading.__file__ or is_tensorscope_file(code.co_filename)):
                kept.append(tb)
            tb = tb.tb_next
        if (sys.version_info >= (3, 13) and len(kept) > 1 and shutdown is not None
                and kept[0].tb_frame.f_code is shutdown.__code__):  # 3.13.0: a handler's frames only (measured)
            kept = kept[1:]
        new = None
        for entry in reversed(kept):
            new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
        e.__traceback__ = new
        e.__context__ = None  # the wait raised it; python's shows no context there
        args = _unraisable_args_type()
        owner = None if sys.version_info >= (3, 13) else threading  # 3.13.0: no "Exception ignored in" line
        hook = sys.unraisablehook
        if args is not None:
            hook(args((type(e), e, new, None, owner)))
        else:
            head = "" if owner is None else f"Exception ignored in: {owner!r}\n"
            sys.stderr.write(head + "".join(traceback.format_exception(type(e), e, new)))
    except BaseException:
        pass
    finally:
        e.__traceback__ = None


def _unraisable_args_type():
    """``sys.UnraisableHookArgs``: not importable; the type of what the hook gets for an exception in ``__del__``."""
    got: list = []
    saved = sys.unraisablehook
    sys.unraisablehook = got.append
    try:
        class _Probe:
            def __del__(self):
                raise RuntimeError

        _Probe()
    except BaseException:
        pass
    finally:
        sys.unraisablehook = saved
    return type(got[0]) if got else None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def print_syntax_error(e: BaseException) -> None:
    """Show a compile error exactly as the interpreter shows it at start-up."""
    e.__traceback__ = None
    _print_exception(e)
