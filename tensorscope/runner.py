"""Running a program exactly as ``python prog.py ARGS`` would, under instrumentation.

The program gets ``__name__ == "__main__"``, its own ``sys.argv``, its folder as
``sys.path[0]``, a fresh ``__main__`` module, and python's own handling of
``SystemExit``, uncaught exceptions (through ``sys.excepthook``, with
tensorscope's frames removed) and ``KeyboardInterrupt``.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import os
import signal
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field

from tensorscope.instrument.frames import is_tensorscope_file
from tensorscope.instrument.patches import strip_traceback


class ProgramTimeout(BaseException):
    """Raised in the program's main thread when --timeout expires."""


class OsExit(BaseException):
    """Raised instead of ending the process when the program calls os._exit(n)."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


@dataclass
class Outcome:
    exit_status: int = 0
    exception: BaseException | None = None
    interrupted: bool = False
    timed_out: bool = False
    os_exit: bool = False
    syntax_error: bool = False
    main_globals: dict | None = field(default=None, repr=False)


def _strip_chain(exc: BaseException) -> None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        strip_traceback(exc)
        for linked in (exc.__cause__, exc.__context__):
            if linked is not None and id(linked) not in seen:
                _strip_chain(linked)
        exc = None


def _exit_status(code) -> int:
    """Python's handling of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code & 0xFF
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
    """Compile like the interpreter does at start-up; raises SyntaxError with python's own wording."""
    nul = source.find(b"\0")
    if nul >= 0:
        lineno = source.count(b"\n", 0, nul) + 1
        start = source.rfind(b"\n", 0, nul) + 1
        text = source[start:nul].decode("utf-8", "replace")
        raise SyntaxError("source code cannot contain null bytes", (filename, lineno, None, text))
    import tokenize
    import io

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    except SyntaxError:
        encoding = None
    if encoding in ("utf-8", "utf-8-sig"):
        try:
            source.decode("utf-8")
        except UnicodeDecodeError as e:
            lineno = source.count(b"\n", 0, e.start) + 1
            raise SyntaxError(
                f"Non-UTF-8 code starting with '\\x{source[e.start]:02x}' in file {filename} on line {lineno}, "
                "but no encoding declared; see https://peps.python.org/pep-0263/ for details") from None
    return compile(source, filename, "exec", dont_inherit=True)


def _walk_stack(f):
    """``traceback.walk_stack`` that ends at the program's outermost frame (see NOTE [Invisible frames]).

    Under plain python the program's ``<module>`` frame is the bottom of the stack; under
    tensorscope the runner and the command line lie below it. Anything that formats the
    current stack (``traceback.print_stack``, logging's ``stack_info``, anomaly mode's
    forward traceback) must not show them.
    """
    if f is None:
        f = sys._getframe().f_back.f_back.f_back.f_back
    while f is not None:
        filename = f.f_code.co_filename
        if is_tensorscope_file(filename):
            if f.f_code is run.__code__:
                return
        else:
            yield f, f.f_lineno
        f = f.f_back


def run(code, *, path: str, argv: list[str], timeout: float | None, on_start=None, on_end=None) -> Outcome:
    """Execute compiled program code as ``__main__``; never raises for the program's own errors."""
    outcome = Outcome()
    is_stdin = path == "-"
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    if is_stdin:
        main.__dict__["__file__"] = "<stdin>"
        main.__dict__["__loader__"] = importlib.machinery.BuiltinImporter
    else:
        main.__dict__["__file__"] = main_filename(path)
        main.__dict__["__loader__"] = importlib.machinery.SourceFileLoader("__main__", main_filename(path))
    main.__dict__["__spec__"] = None
    main.__dict__["__cached__"] = None
    main.__dict__["__package__"] = None
    saved_main = sys.modules.get("__main__")
    saved_argv = sys.argv
    saved_path0 = sys.path[0] if sys.path else None
    sys.modules["__main__"] = main
    sys.argv = [path, *argv]
    folder = "" if is_stdin else os.path.dirname(os.path.realpath(path))
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    real_os_exit = os._exit

    def os_exit(status):
        raise OsExit(status)

    os._exit = os_exit
    real_walk_stack = traceback.walk_stack
    traceback.walk_stack = _walk_stack
    old_alarm = None
    if timeout:
        def on_alarm(signum, frame):
            raise ProgramTimeout()

        old_alarm = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        if on_start is not None:
            on_start()
        try:
            exec(code, main.__dict__)
        finally:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if on_end is not None:
                on_end()
    except SystemExit as e:
        outcome.exit_status = _exit_status(e.code)
    except OsExit as e:
        outcome.exit_status = int(e.status) & 0xFF
        outcome.os_exit = True
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
    finally:
        if timeout and old_alarm is not None:
            signal.signal(signal.SIGALRM, old_alarm)
        os._exit = real_os_exit
        traceback.walk_stack = real_walk_stack
        if not outcome.os_exit:
            _join_threads()
        _flush()
        outcome.main_globals = main.__dict__
        sys.modules["__main__"] = saved_main
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    return outcome


def _print_exception(e: BaseException) -> None:
    _flush()
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except Exception:
        traceback.print_exception(type(e), e, e.__traceback__)
    _flush()


def _join_threads() -> None:
    """Wait for non-daemon threads, as the interpreter does before exiting."""
    main = threading.main_thread()
    for t in threading.enumerate():
        if t is not main and not t.daemon and t is not threading.current_thread():
            try:
                t.join()
            except Exception:
                pass


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
