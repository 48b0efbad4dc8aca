"""One run of tensorscope: program -> instrumentation -> recorded facts -> report document."""

from __future__ import annotations

import ast
import dataclasses
import gc
import os
import signal
import sys
import threading
from dataclasses import dataclass

from tensorscope import children, exits, report, runner
from tensorscope.instrument.frames import UserCode, segment_at
from tensorscope.torch_import import IMPORT_FAILED, MISSED, NEVER_IMPORTED_TORCH, UNWATCHED, TorchImportWatch


@dataclass
class Result:
    doc: dict | None  # None in a forked child: it never writes the parent's report
    exit_status: int
    interrupted: bool = False
    timed_out: bool = False
    os_exit: bool = False
    signal: int | None = None  # the signal that ended the program
    exit_code: int | None = None  # sys.exit's int beyond a C long: NOTE [A status beyond a C long]


class Session:
    """Runs one program under instrumentation and builds its report."""

    def __init__(self, *, command, program, argv, source, json_mode, device, timeout, ops=False, module=False,
                 check_values=False):
        self.command = command
        self.program = program
        self.argv = argv
        self.source = source
        self.json_mode = json_mode
        self.device = device
        self.timeout = timeout
        self.ops = ops
        self.module = module  # program is a module name, run as `python -m program`
        self.check_values = check_values  # run --check-values: explain's saved-tensor hooks and fingerprints
        # whether the program's stdout is a terminal, taken before --json points fd 1 elsewhere
        self.stdout_tty = _is_tty(1)
        self._gc_was_enabled = False  # see resume_collector
        self._saved_stdout_fd = None  # --json: the real stdout while the program's goes to stderr
        self.held = None  # exits.HeldSignals while the report is written (see release_signals)

    def execute(self, hold_collector: bool = False, on_abrupt_end=None) -> Result:
        """Run the program and build its report. With ``hold_collector`` the cyclic collector stays off
        until ``resume_collector`` (see NOTE [No collector passes while the report is built]).

        ``on_abrupt_end(result)`` writes the report of a program that ends the process itself
        (``os._exit``, SIGTERM, SIGHUP: see NOTE [Ending as python ends]) and returns the exit status
        to end with, or None; ``result`` is None when building the report failed. When ``execute`` returns, SIGINT, SIGTERM and SIGHUP are held until
        ``release_signals``.
        """
        if not hold_collector:
            try:
                return self.execute(hold_collector=True, on_abrupt_end=on_abrupt_end)
            finally:
                self.resume_collector()
        if self.json_mode:
            # The one JSON document owns stdout: the program's stdout goes to stderr.
            sys.stdout.flush()
            self._saved_stdout_fd = os.dup(1)
            os.dup2(2, 1)
        try:
            return self._execute(on_abrupt_end)
        finally:
            self._restore_stdout()

    def _restore_stdout(self) -> None:
        saved, self._saved_stdout_fd = self._saved_stdout_fd, None
        if saved is not None:
            try:
                sys.stdout.flush()
            except Exception:
                pass
            os.dup2(saved, 1)
            os.close(saved)

    def release_signals(self) -> None:
        """The report is written: put the signal handlers back, and die by a signal that came meanwhile."""
        held, self.held = self.held, None
        if held is not None:
            held.release()

    def _execute(self, on_abrupt_end) -> Result:
        # NOTE [Compile the program before importing torch]
        # Compiling a long script builds its whole syntax tree first (a generated 20,000-line script:
        # about 50 MB), which compile() frees before the program runs. Compiled before torch is
        # imported, those freed pages are reused by torch's own import; compiled after, they stay
        # resident under everything that follows, and the run's peak memory was their sum
        # (benchmarks/RESULTS.md, "Peak memory (mem13, 2026-11-26 evening)"). So nothing this module
        # imports at its top imports torch (transparent.py, which children.py and exits.py dress their
        # wrappers with, needs none), the program is compiled first, and torch is imported by the
        # program itself, when it does: the instrumentation goes in at that import (NOTE
        # [Instrumenting at the program's import of torch] in tensorscope/torch_import.py), so a driver
        # that compiles a long script itself before its own ``import torch`` peaks as under python too.
        code = filename = None
        if not self.module:  # a module is found and compiled by runpy, as under python -m
            filename = runner.main_filename(self.program)
            try:
                code = runner.compile_program(self.source, filename)
            except (SyntaxError, ValueError) as e:
                runner.print_syntax_error(e)
                return Result(self._static_doc(e, filename), 1)

        # NOTE [Instrumenting at the program's import of torch] (tensorscope/torch_import.py): torch
        # already imported (sitecustomize, a .pth file, --device cuda's check): installed now, as
        # before; else when the program's own import of torch completes, or never.
        inst = _Instrumentation(self, None if self.program == "-" else filename)  # None with -m
        if "torch" in sys.modules:
            inst.install()
            if inst.error is not None:
                raise inst.error
        else:
            inst.watch_import()

        def abrupt_end(outcome):  # in whichever thread ended the process: see NOTE [Ending as python ends]
            self._restore_stdout()
            try:
                tracker = inst.end()
                if tracker is None:
                    result = self._report_without_torch(inst, outcome)
                else:
                    result = self._report(tracker, *_recorded(tracker, outcome), outcome, inst.torch_version())
            except Exception:  # the caller says so, and picks the exit status
                result = None
            return None if on_abrupt_end is None else on_abrupt_end(result)

        try:
            outcome = runner.run(code, path=self.program, argv=self.argv, timeout=self.timeout,
                                 on_end=inst.end, module=self.program if self.module else None,
                                 on_abrupt_end=abrupt_end)
        finally:
            tracker = inst.end()
        self.held = outcome.held
        if outcome.forked_child:  # the program forked and the child returned: python's exit, no report
            return Result(None, outcome.exit_status, exit_code=outcome.exit_code)
        if inst.error is not None:  # installing failed inside the program's import of torch: tensorscope's error
            raise inst.error
        if tracker is None:
            return self._report_without_torch(inst, outcome)
        # NOTE [No collector passes while the report is built]
        # The program has ended; building the report allocates one container per fact, and the
        # cyclic collector would walk the program's whole heap again and again meanwhile (a
        # second on a 4,000-parameter model). Writing the report allocates as much again, and
        # after a program the heap is often ripe for a full pass, so the next automatic pass
        # would walk the program's whole heap for tensorscope's objects (0.06 to 0.16 s on the
        # smallest program). So the collector stays off until the caller has written the report
        # and dropped it; ``resume_collector`` then makes a young pass over what is left and turns
        # it on again, as the program left it, before the program's atexit handlers run.
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._report(tracker, *_recorded(tracker, outcome), outcome, inst.torch_version())
        except BaseException:
            self.resume_collector()
            raise

    def resume_collector(self) -> None:
        """Turn the cyclic collector back on if the program had it on (see NOTE [No collector passes
        while the report is built]). Idempotent; call it once the report is written and dropped."""
        if self._gc_was_enabled:
            self._gc_was_enabled = False
            # What stays of tensorscope's allocations after the program ended (the report's modules:
            # freeing the report itself takes back only what it counted) would set off the next
            # pass within a few hundred allocations, a full one where the heap is ripe for it;
            # interpreter shutdown makes its own full pass anyway. A young pass over those few
            # objects (microseconds) starts the count afresh.
            gc.collect(0)
            gc.enable()

    def _program(self, outcome, user) -> dict:
        """The report's ``program`` object."""
        path = self.program
        if self.module:  # the module's file once runpy found it, as python puts it in sys.argv[0]
            path = (outcome.main_globals or {}).get("__file__") or self.program
        return {
            "path": path,
            "module": self.program if self.module else None,
            "argv": [path, *self.argv],
            "exit_status": outcome.exit_status,
            "exception": exception_info(outcome.exception, user) if not outcome.timed_out else None,
            "children": [child.to_json() for child in outcome.children],
        }

    def _report_without_torch(self, inst, outcome) -> Result:
        """The report of a program that never imported torch (or whose import of it could not be
        watched): what ran, how it ended, its children; nothing recorded."""
        program = self._program(outcome, UserCode(inst.filename))
        if inst.missed:
            note = MISSED
        elif inst.failed:
            note = IMPORT_FAILED
        else:  # torch in sys.modules all the same: loaded without an import (NOTE [torch loaded without an import])
            note = UNWATCHED if sys.modules.get("torch") is not None else NEVER_IMPORTED_TORCH
        env = torchrun_env()
        doc = report.skeleton(command=self.command, program=program, torch_version=None, device_mode=self.device,
                              notes=[note], distributed=None if env is None else {**env, "backend": None})
        self._end_notes(doc, outcome)
        outcome.main_globals = None
        return Result(doc, outcome.exit_status, interrupted=outcome.interrupted, timed_out=outcome.timed_out,
                      os_exit=outcome.os_exit, signal=outcome.signal, exit_code=outcome.exit_code)

    def _report(self, tracker, recording, distributed, events, sites, outcome, torch_version) -> Result:
        from tensorscope import diagnose

        program = self._program(outcome, tracker.user)
        doc = report.build(recording, command=self.command, program=program, torch_version=torch_version,
                           device_mode=self.device, distributed=distributed, events=events, sites=sites)
        del events, sites  # emptied by build (NOTE [Events handed over to the report] in report.py)
        self._end_notes(doc, outcome)
        diagnose.attach(doc, recording)
        outcome.main_globals = None
        return Result(doc, outcome.exit_status, interrupted=outcome.interrupted, timed_out=outcome.timed_out,
                      os_exit=outcome.os_exit, signal=outcome.signal, exit_code=outcome.exit_code)

    def _end_notes(self, doc, outcome) -> None:
        """The notes on how the program ended."""
        if outcome.timed_out:
            doc["notes"].append(f"stopped after --timeout {self.timeout:g} s: the report is partial")
        if outcome.interrupted:
            doc["notes"].append("interrupted (KeyboardInterrupt): the report is partial")
        if outcome.signal is not None:
            doc["notes"].append(f"ended by {signal.Signals(outcome.signal).name}: the report is partial")
        if children.note(outcome.children):
            doc["notes"].append(children.note(outcome.children))
        if outcome.os_exit:
            doc["notes"].append(f"the program called os._exit({outcome.exit_status}): the report is what it "
                                "had done by then")

    def _static_doc(self, e, filename) -> dict:
        """The report of a program that did not compile (see NOTE [One document skeleton])."""
        # torch is not imported for a program that did not compile (NOTE [Instrumenting at the
        # program's import of torch] in tensorscope/torch_import.py): its version when it is loaded already
        torch_version = getattr(sys.modules.get("torch"), "__version__", None)
        env = torchrun_env()
        exception = {"type": type(e).__name__, "message": str(getattr(e, "msg", e)),
                     "file": report.display_path(filename), "line": getattr(e, "lineno", None)}
        return report.skeleton(
            command=self.command,
            program={"path": self.program, "module": None, "argv": [self.program, *self.argv], "exit_status": 1,
                     "exception": exception},
            torch_version=torch_version, device_mode=self.device,
            notes=["the program did not compile, so nothing ran"],
            distributed=None if env is None else {**env, "backend": None})


class _Instrumentation:
    """The instrumentation of one run: installed at once when torch is imported already, else when the
    program's import of torch completes (NOTE [Instrumenting at the program's import of torch] in
    tensorscope/torch_import.py), and stopped once, when the program ends."""

    def __init__(self, session: Session, filename):
        self.session = session
        self.filename = filename
        self.lock = threading.RLock()  # RLock: a signal's report may end the run inside an install
        self.tracker = None
        self.ended = False
        self.missed = False  # torch was imported but its import could not be watched
        self.failed = False  # the program's import of torch failed
        self.error = None  # what installing raised inside the program's import: raised once the program ended
        self._watch = None
        self._timer = None  # --timeout's itimer, paused while torch is imported and instrumented
        self._control = self._cm = self._progress = None

    def watch_import(self) -> None:
        self._watch = TorchImportWatch(self._on_import, self._on_begin)
        self._watch.install()

    # --timeout counts the program's own time: torch's import and the install are not in it, as when
    # both came before the program (tensorscope/torch_import.py)
    def _on_begin(self) -> None:
        with exits.handlers_held():  # NOTE [Signals wait while tensorscope installs itself] in exits.py
            children.unwatched_begin()  # what torch's import starts is not the program's (children.py)
            self._timer = None
            if not self.session.timeout:  # the program's own interval timer is the program's
                return
            remaining = signal.setitimer(signal.ITIMER_REAL, 0)
            if remaining[0] > 0:
                self._timer = remaining

    def _resume_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            signal.setitimer(signal.ITIMER_REAL, *timer)

    def _on_import(self, module) -> None:
        """In the thread whose import of torch just ended, inside that import (module None: it failed)."""
        with exits.handlers_held():  # NOTE [Signals wait while tensorscope installs itself] in exits.py
            try:
                if module is not None:
                    self._install_at_import()
            finally:
                children.unwatched_end()
                self._resume_timer()

    def _install_at_import(self) -> None:
        main = threading.current_thread() is threading.main_thread()
        try:
            # every thread's running frames: the program's frames among them get line events from now on
            frames = list(sys._current_frames().values())
        except Exception:
            frames = [sys._getframe()]
        with runner.depth_kept():  # NOTE [Line callbacks installed inside the program] in runner.py
            self.install(frames=frames, on_main=None if main else _on_main_thread)

    def install(self, frames=None, on_main=None) -> None:
        with self.lock:
            if self.ended or self.tracker is not None:
                return
            try:
                from tensorscope.instrument import session as instrument

                s = self.session
                tracker = instrument.new_tracker(self.filename)
                progress = Progress(tracker, stdout_tty=s.stdout_tty)
                # saved-tensor hooks only where their facts are needed (see NOTE [Hooks only under explain])
                cm = instrument.active(tracker, device=s.device, ops=s.ops,
                                       hooks=s.command == "explain" or s.check_values, frames=frames, on_main=on_main)
                control = cm.__enter__()
            except Exception as e:
                self.error = e
                return
            self.tracker, self._progress, self._cm, self._control = tracker, progress, cm, control
            progress.start()

    def end(self):
        """The program has ended (on_end, or a report written as the process ends): stop recording,
        once. Returns the tracker, or None when the program never imported torch."""
        with self.lock:
            if not self.ended:
                self.ended = True
                if self._watch is not None:
                    self._watch.remove()
                    self.missed, self.failed = self._watch.missed, self._watch.failed
                if self._control is not None:
                    self._progress.stop()
                    self._control.stop()
                    cm, self._cm = self._cm, None
                    try:
                        cm.__exit__(None, None, None)
                    except Exception:
                        pass
            return self.tracker

    def torch_version(self) -> str | None:
        torch = sys.modules.get("torch")
        return getattr(torch, "__version__", None)


_PENDING = []  # the main-thread calls handed to the interpreter: alive until it has made them


def _on_main_thread(fn) -> None:
    """Run ``fn`` on the main thread when it next runs Python code (the interpreter's pending calls,
    as its signal handlers are run). For what torch keeps per thread, when torch was imported on
    another thread: NOTE [Instrumenting at the program's import of torch] in torch_import.py."""
    import ctypes

    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

    def call(_):
        try:
            fn()
        except Exception:
            pass
        return 0

    callback = callback_type(call)
    _PENDING.append(callback)
    try:  # a prototype of its own: ctypes.pythonapi's attributes stay as the program set them
        add = ctypes.PYFUNCTYPE(ctypes.c_int, callback_type, ctypes.c_void_p)(("Py_AddPendingCall", ctypes.pythonapi))
        add(callback, None)
    except Exception:
        pass


class Progress:
    """A live line on stderr (events recorded, seconds elapsed) for long runs, only on a terminal.

    Drawn after 2 s, redrawn twice a second, erased when the program ends; only when both stderr
    and stdout are terminals: never in a file or a pipe (logs and `-o` comparisons see nothing of
    it), nor under a pager (`tensorscope run p.py | less`), where it would land on the pager's screen.
    Set TENSORSCOPE_NO_PROGRESS=1 to switch it off.
    """

    DELAY = 2.0
    PERIOD = 0.5

    def __init__(self, tracker, stdout_tty: bool = True):
        self.tracker = tracker
        self.enabled = stdout_tty and _is_tty(2) and not os.environ.get("TENSORSCOPE_NO_PROGRESS")
        self.drawn = False
        self._stop = None
        self._thread = None

    def start(self) -> None:
        if not self.enabled:
            return
        import threading
        import time

        self._stop = threading.Event()
        started = time.monotonic()

        def loop():
            if self._stop.wait(self.DELAY):
                return
            while True:
                t = self.tracker
                events = t.seq + t.aggregated
                # cursor back to column 0 afterwards: the program's next output overwrites the line
                line = f"\r\x1b[2Ktensorscope: {events:,} events, {time.monotonic() - started:.0f} s\r"
                try:
                    os.write(2, line.encode())
                    self.drawn = True
                except OSError:
                    return
                if self._stop.wait(self.PERIOD):
                    return

        self._thread = threading.Thread(target=loop, name="tensorscope-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self.drawn:
            try:
                os.write(2, b"\r\x1b[2K")
            except OSError:
                pass


def _recorded(tracker, outcome) -> tuple:
    """(recording, distributed, events, sites) of the run; nothing after this sees the tracker's tables
    (see instrument.session.record). The recording's events and sites are handed over apart, as lists the report
    takes (NOTE [Events handed over to the report] in report.py); the recording returned has none."""
    from tensorscope.instrument import session as instrument

    instrument.release_run_state(tracker)
    snap = instrument.snapshot(tracker, outcome.main_globals, outcome.exception)
    recording = instrument.record(tracker, snap, release=True)
    del snap
    events, sites = list(recording.events), list(recording.sites)
    recording = dataclasses.replace(recording, events=(), sites=())
    return recording, instrument.distributed_info(tracker, torchrun_env()), events, sites


def torchrun_env() -> dict | None:
    """Rank, local rank and world size when torchrun's environment is present, else None."""
    try:
        return {key.lower(): int(os.environ[key]) for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    except (KeyError, ValueError):
        return None


def _is_tty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def exception_info(exc, user) -> dict | None:
    """``program.exception`` of the report: the exception that ended the program, at its last line in
    the program's own files (``user``: instrument's UserCode)."""
    if exc is None:
        return None
    file = line = last = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in user:
            file, line, last = tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb
        tb = tb.tb_next
    info = {"type": type(exc).__name__, "message": exception_message(exc), "file": report.display_path(file),
            "line": line}
    raised = raised_in(last)
    if raised is not None:
        info["raised_in"] = raised
    return info


# NOTE [An exception a library raised at the program's line]
# An uncaught exception whose traceback goes on past the program's last line into a library's Python code
# (torch.load's weights_only UnpicklingError since torch 2.6, a `json.loads` of bad text) was raised by
# that library, which the program's line called: ``program.exception.raised_in`` says which. ``call`` is
# the callee as the program wrote it (``torch.load``), read from the syntax of the expression the line's
# frame was executing (co_positions, or the bytecode on 3.10: frames.call_segment's reading); ``function``
# is the function the line entered (its module and qualified name: ``torch.serialization.load``); ``file``
# and ``line`` where the exception was raised (the traceback's last entry), relative to site-packages or
# the standard library. An exception raised in the program's own code, or by C code the line called
# directly (``int("x")``), has none. The `other` kind's diagnosis then names the call instead of calling
# the error "the program's own Python logic" (kinds/other.py).
def raised_in(last) -> dict | None:
    """Where past the program's last traceback entry ``last`` the exception was raised, or None."""
    if last is None or last.tb_next is None:
        return None
    try:
        entry = deepest = last.tb_next
        while deepest.tb_next is not None:
            deepest = deepest.tb_next
        code = entry.tb_frame.f_code
        module = entry.tb_frame.f_globals.get("__name__")
        name = getattr(code, "co_qualname", code.co_name)
        return {"call": _callee(last.tb_frame.f_code, last.tb_lasti),
                "function": f"{module}.{name}" if isinstance(module, str) else name,
                "file": _library_path(deepest.tb_frame.f_code.co_filename), "line": deepest.tb_lineno}
    except Exception:  # a description, never a crash
        return None


def _callee(code, lasti) -> str | None:
    """The callee of the call the instruction ``lasti`` of ``code`` runs, as the source writes it, or None."""
    segment = segment_at(code, lasti)
    if not segment:
        return None
    try:
        node = ast.parse(segment.strip(), mode="eval").body
    except SyntaxError:
        return None
    return ast.unparse(node.func) if isinstance(node, ast.Call) else None


def _library_path(path: str) -> str:
    """``path`` from its installation's folder on: ``torch/serialization.py``, ``json/decoder.py``."""
    for marker in ("site-packages", "dist-packages"):
        i = path.rfind(os.sep + marker + os.sep)
        if i >= 0:
            return path[i + len(marker) + 2:]
    stdlib = os.path.dirname(os.__file__) + os.sep  # the standard library's folder
    if path.startswith(stdlib):
        return path[len(stdlib):]
    return report.display_path(path) or path


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or python's own placeholder when the exception's ``__str__`` raises."""
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"
