"""Child processes the program starts: named in the report with how they ended.

NOTE [Child processes]
tensorscope records the process it runs, not its children. A forked child (multiprocessing's fork
start method, DataLoader workers, torch.multiprocessing's hogwild workers) carries a copy of the
recording that ends with it; a spawned or exec'd child (multiprocessing spawn and forkserver,
``subprocess`` running python) runs plain python. So the report names each child, its pid and
how it ended, and a child that failed is never reported as clean. Children are seen where they
start (``os.fork``; ``_posixsubprocess.fork_exec``, which both ``subprocess`` and multiprocessing's
spawn call; ``os.posix_spawn`` and ``os.posix_spawnp``, which ``subprocess`` calls instead of fork_exec
when it can: on Python 3.13 with glibc 2.34+ (``os.POSIX_SPAWN_CLOSEFROM``) that is the default
``close_fds=True`` too, for an executable given with its directory and no preexec_fn, cwd, pass_fds,
user or group, so ``subprocess.run([sys.executable, ...])`` never reaches fork_exec there; before
3.13 only with ``close_fds=False``) and where the program waits for them (``os.waitpid``, which ``Popen.wait`` and
``multiprocessing.Process.join`` call). A child nobody waited for is looked at without reaping it
(``waitid`` with WNOWAIT), so the program's own atexit handlers still find it.

A child that the program ends itself is not a failure: ``Pool.terminate`` (which a Pool's ``with``
block calls), ``Process.terminate``/``kill`` and ``Popen.terminate``/``kill``/``send_signal`` all call
``os.kill(pid, sig)`` (3.10 to 3.13), so the signals the program sends its children (``os.kill``, and
``os.killpg`` of a group a child leads) are kept with the child. After SIGTERM, SIGKILL, SIGINT, SIGHUP
or SIGQUIT from the program, however the child ends is the program's doing (a multiprocessing child
interrupted by SIGINT exits 1); after another signal, only a death by that signal is.

NOTE [A signal that reaches a child before it runs]
Linux runs the parent first after fork, so ``p.start(); p.terminate()`` sends SIGTERM before the
child has run a single instruction. Under python SIGTERM is at SIG_DFL and the kernel ends the child.
Under tensorscope SIGTERM and SIGHUP have a Python-level handler (exits.fatal_signals_report): its
C part only sets a flag, which CPython clears in the child right after fork (``PyOS_AfterFork_Child``
calls ``_PySignal_AfterFork``, so that a signal is not handled in both processes), and the child lives
on (here: it slept its 60 s and exited 0). So ``os.fork`` blocks those signals while it forks; the child
puts SIG_DFL back before unblocking them, and a SIGTERM that came meanwhile ends it there, at once.

NOTE [The fork warning at the program's line]
Python 3.12+ warns at ``os.fork()`` in a process with more than one thread ("This process (pid=N) is
multi-threaded, use of fork() may lead to deadlocks in the child.", a DeprecationWarning, then cleared if
a filter made it an error). Its C code locates the warning at the innermost Python frame, which under
tensorscope is the wrapper below, and python's default filters show a DeprecationWarning only in
``__main__``: a script's own ``os.fork()`` showed it under python and not under tensorscope (on a GPU
machine autograd's device threads make any program that ran backward multi-threaded). Catching it with
``catch_warnings`` is no fix: entering and leaving it bumps the filters' version, which empties every
module's warning registry, so each fork would make the program's "default" warnings show again. So
where the filters drop the warning at this module (python's defaults) the wrapper issues it in the
parent at the frame that called ``os.fork``, with that frame's module and registry, when python's own
test holds: more than one thread in ``/proc/self/stat``'s 20th field, else ``threading``'s count. Where
the filters let it through here (``-W default``, ``simplefilter("always")``) python's C code has issued
it, and the warnings hook relocates it (NOTE [Warnings from wrapped calls] in patches.py).
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import signal
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field

from tensorscope import exits, warnfilters
from tensorscope.instrument.frames import signals_run, strip_for_reraise
from tensorscope.instrument.transparent import named

_FORK_WARNS = sys.version_info >= (3, 12)  # NOTE [The fork warning at the program's line]


def _threads() -> int:
    """The process's threads, counted as python's fork warning counts them (3.12 and 3.13, Linux)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read(159).split(b" ")
        n = int(fields[19]) if len(fields) > 19 else 0
    except (OSError, ValueError):
        n = 0
    if n <= 0:
        n = len(getattr(threading, "_active", ())) + len(getattr(threading, "_limbo", ()))
    return n


def _warn_fork(frame) -> None:
    """Python's fork warning, at the program's ``frame``, where it was dropped at the wrapper's."""
    try:
        if _threads() <= 1:
            return
        text = f"This process (pid={os.getpid()}) is multi-threaded, use of fork() may lead to deadlocks in the child."
        if warnfilters.action(text, DeprecationWarning, __name__, 0) != "ignore":
            return  # python's C code issued it here: NOTE [Warnings from wrapped calls] relocates it
        g = frame.f_globals
        module = g.get("__name__")
        registry = g.get("__warningregistry__")
        if not isinstance(registry, dict):
            registry = g["__warningregistry__"] = {}
        warnings.warn_explicit(text, DeprecationWarning, frame.f_code.co_filename, frame.f_lineno,
                               module=module if isinstance(module, str) else "<string>", registry=registry)
    except Exception:  # an "error" filter: python's C code clears it
        pass


#: signals after which however a child ends is the program's doing (see NOTE [Child processes])
STOPPING = frozenset({signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})


@dataclass
class Child:
    pid: int
    start: str  # "fork", or "exec" (subprocess, multiprocessing spawn/forkserver)
    argv: list | None = None  # the command line of an exec'd child
    exit_status: int | None = None  # as subprocess's returncode: negative when a signal ended it
    signals: set = field(default_factory=set)  # the signals the program sent it (os.kill, os.killpg)

    @property
    def failed(self) -> bool:
        """Ended badly: a forked or python child that exited non-zero or was killed. Other programs
        (``grep``, ``git``) say things with their status that the program reads itself."""
        if self.exit_status in (0, None):
            return False
        if self.signals & STOPPING or -self.exit_status in self.signals:  # the program ended it
            return False
        return self.start == "fork" or bool(self.argv) and os.path.basename(self.argv[0]).startswith("python")

    def to_json(self) -> dict:
        return {"pid": self.pid, "start": self.start, "argv": self.argv, "exit_status": self.exit_status,
                "failed": self.failed}


class Watch:
    """The children started while ``watched`` was on, in start order."""

    def __init__(self):
        self.started: dict[int, Child] = {}

    def children(self) -> list:
        """Every child, each with how it ended as far as known now."""
        for child in self.started.values():
            if child.exit_status is None:
                child.exit_status = _peek(child.pid)
        return list(self.started.values())


#: threads importing torch: the processes torch's own import starts (``ldconfig -p`` on torch 2.15, to find its
#: libraries) are not the program's children, as when torch was imported before the program (NOTE
#: [Instrumenting at the program's import of torch] in torch_import.py)
_UNWATCHED: set = set()


def unwatched_begin() -> None:
    """The processes this thread starts from now on are not recorded (until ``unwatched_end``)."""
    _UNWATCHED.add(threading.get_ident())


def unwatched_end() -> None:
    _UNWATCHED.discard(threading.get_ident())


@contextlib.contextmanager
def watched():
    """Record the children the program starts while the block runs; yields a ``Watch``."""
    watch = Watch()
    started = watch.started
    parent = os.getpid()
    real_fork, real_waitpid, real_fork_exec = os.fork, os.waitpid, _posixsubprocess.fork_exec
    real_subprocess_fork_exec = getattr(subprocess, "_fork_exec", None)

    def fork():
        # NOTE [A signal that reaches a child before it runs]
        blocked = exits.stand_ins()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked) if blocked else None
        try:
            pid = real_fork()
            if pid == 0:
                exits.default_again(blocked)
        except BaseException as e:  # NOTE [Invisible frames]
            strip_for_reraise(e)
            raise
        finally:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if _FORK_WARNS and pid > 0:
            _warn_fork(sys._getframe(1))
        if pid > 0 and os.getpid() == parent and threading.get_ident() not in _UNWATCHED:
            started[pid] = Child(pid, "fork")
        return pid

    def exec_started(pid, argv):
        if os.getpid() == parent and threading.get_ident() not in _UNWATCHED:
            try:
                names = [os.fsdecode(a) for a in argv]
            except Exception:
                names = None
            started[pid] = Child(pid, "exec", names)
        return pid

    # each wrapper below raises the real function's own error without a frame of its own in the program's
    # traceback (NOTE [Invisible frames])
    def fork_exec(*args):
        try:
            pid = real_fork_exec(*args)
        except BaseException as e:
            strip_for_reraise(e)
            raise
        return exec_started(pid, args[0])

    def spawner(real):
        def posix_spawn(*args, **kwargs):
            try:
                pid = real(*args, **kwargs)  # its own errors for its own arguments (path, argv, env, /, ...)
            except BaseException as e:
                strip_for_reraise(e)
                raise
            return exec_started(pid, args[1])
        return named(posix_spawn, real)

    def sender(real, group: bool):
        def kill(pid, sig, /):
            try:
                real(pid, sig)
            except BaseException as e:
                strip_for_reraise(e)
                raise
            if os.getpid() == parent:
                child = started.get(pid if group or pid > 0 else -pid)
                if child is not None:
                    child.signals.add(sig)
        return named(kill, real)

    real_kill, real_killpg = os.kill, getattr(os, "killpg", None)
    real_spawns = {name: getattr(os, name) for name in ("posix_spawn", "posix_spawnp") if hasattr(os, name)}

    @signals_run  # a signal's handler runs inside it, as inside python's os.waitpid (exits.py)
    def waitpid(*args):
        pid, status = real_waitpid(*args)
        child = started.get(pid) if pid > 0 else None
        if child is not None and (os.WIFEXITED(status) or os.WIFSIGNALED(status)):
            child.exit_status = os.waitstatus_to_exitcode(status)
        return pid, status

    fork_exec = named(fork_exec, real_fork_exec)
    os.fork, os.waitpid, _posixsubprocess.fork_exec = named(fork, real_fork), named(waitpid, real_waitpid), fork_exec
    if real_subprocess_fork_exec is not None:
        subprocess._fork_exec = fork_exec
    for name, real in real_spawns.items():
        setattr(os, name, spawner(real))
    os.kill = sender(real_kill, False)
    if real_killpg is not None:
        os.killpg = sender(real_killpg, True)
    try:
        yield watch
    finally:
        os.fork, os.waitpid, _posixsubprocess.fork_exec = real_fork, real_waitpid, real_fork_exec
        if real_subprocess_fork_exec is not None:
            subprocess._fork_exec = real_subprocess_fork_exec
        for name, real in real_spawns.items():
            setattr(os, name, real)
        os.kill = real_kill
        if real_killpg is not None:
            os.killpg = real_killpg


def _peek(pid: int) -> int | None:
    """How an unwaited child ended, leaving it to be waited for; None while it runs (or if reaped)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError, AttributeError):
        return None
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def note(children: list) -> str | None:
    """The report's note about the children, or None without any."""
    if not children:
        return None
    failed = [c for c in children if c.failed]
    running = [c for c in children if c.exit_status is None]
    text = (f"{len(children)} child process{'es' if len(children) != 1 else ''} ran outside the recording "
            "(their tensors and backward calls are not in this report: see program.children)")
    if failed:
        text += "; failed: " + ", ".join(f"pid {c.pid} ({_how(c.exit_status)})" for c in failed)
    if running:
        text += f"; {len(running)} still running or not waited for"
    return text


def _how(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"
