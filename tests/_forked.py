"""Run many `python PROG` and `python -m tensorscope ARGS` in one process tree: one torch import for all.

Used by tests/_cli.py:run_many (see there). ``python tests/_forked.py JOBS.json`` imports torch and
tensorscope's CLI once, then forks one child per job. Each child is a fresh copy of a process that has
only imported (no op has run, no recording began), so the runs share nothing but those imports: each
gets its own stdin, stdout and stderr files, environment variables (those read at run time), working
directory, ``sys.argv``, ``sys.path[0]`` and ``__main__`` as python gives them, and leaves like python
does (threads that are not daemons joined, atexit handlers, flushed streams, the exit status of
``sys.exit`` or 1 after an uncaught exception with its traceback). It does not finalize the interpreter
(no module teardown, no last collection). What a fork saves is the import of torch, about half of a
small program's run under ``explain``.

Prints one JSON list of exit statuses (negative: killed by that signal) on stdout. With ``--serve``
it takes jobs one at a time on stdin instead (tests/_cli.py: run_cli), for the life of a test process.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
import threading
import traceback

import torch  # noqa: F401  (the imports every job makes: done once, before the forks)

import tensorscope.cli  # noqa: F401
import tensorscope.session  # noqa: F401

# What every `run` and `explain` imports after the command line is read: the instrumentation, the kinds
# registry, diagnosis and the report's forms (about 0.3 s of CPU per child when each imported them). None
# of it runs anything: it is tensorscope's own code, loaded as a fresh `python -m tensorscope` loads it.
import rich.console  # noqa: F401,E402  (the text report)
import tensorscope.compact  # noqa: F401,E402
import tensorscope.diagnose  # noqa: F401,E402
import tensorscope.instrument.session  # noqa: F401,E402
import tensorscope.kinds  # noqa: F401,E402
import tensorscope.render.json  # noqa: F401,E402
import tensorscope.render.text  # noqa: F401,E402

_OURS = (os.path.abspath(__file__), runpy.__file__, "<frozen runpy>")


def _exit_status(code) -> int:
    """What python makes of ``SystemExit(code)`` (an int beyond the status range is 255, like python)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if -(2 ** 31) <= code < 2 ** 31 else 255
    print(code, file=sys.stderr)
    return 1


def _uncaught(e: BaseException) -> int:
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in _OURS:
        tb = tb.tb_next  # python's traceback starts at the program's frame
    sys.excepthook(type(e), e.with_traceback(tb), tb)
    return 1


def _child(job: dict) -> int:
    out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    if job.get("stdin"):
        os.dup2(os.open(job["stdin"], os.O_RDONLY), 0)
    if "environ" in job:  # the whole environment (tests/_cli.py checks what torch reads at its import)
        os.environ.clear()
        os.environ.update(job["environ"])
    for name, value in job.get("env", {}).items():  # read at run time: nothing torch reads at its import
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    os.chdir(job["cwd"])
    try:
        if job["kind"] == "python":
            path = os.path.abspath(job["args"][0])
            sys.argv = list(job["args"])
            sys.path[0] = os.path.dirname(path)
            runpy.run_path(path, run_name="__main__")
        else:
            sys.argv = ["tensorscope", *job["args"]]
            sys.path[0] = os.getcwd()
            runpy.run_module("tensorscope", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_status(e.code)
    except BaseException as e:  # noqa: BLE001 - reported as python reports it
        code = _uncaught(e)
    try:
        threading._shutdown()  # as python leaves: wait for the threads that are not daemons, then atexit
    except BaseException:  # noqa: BLE001
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    return code


_SERVER_FDS: list = []


def _fork(job: dict) -> int:
    """Start JOB in a child; its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd in _SERVER_FDS:  # the server's pipes are not the run's
                os.close(fd)
            code = _child(job)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    return pid


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def serve() -> None:
    """``python tests/_forked.py --serve``: one JSON job a line on stdin; for each, the child's pid as soon as it
    started, then its exit status, one JSON line each on stdout. Ends at the end of stdin."""
    requests, replies = os.fdopen(os.dup(0)), os.fdopen(os.dup(1), "w")
    _SERVER_FDS.extend((requests.fileno(), replies.fileno()))
    os.dup2(os.open(os.devnull, os.O_RDWR), 0)  # a child without stdin= reads nothing (stdin=DEVNULL)
    for line in requests:
        pid = _fork(json.loads(line))
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        replies.write(json.dumps({"status": _wait(pid)}) + "\n")
        replies.flush()


def main() -> None:
    if sys.argv[1] == "--serve":
        serve()
        return
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    print(json.dumps([_wait(_fork(job)) for job in jobs]))


if __name__ == "__main__":
    main()
