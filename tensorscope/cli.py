"""The command line: the only module that parses arguments, owns consoles and picks exit codes."""

from __future__ import annotations

import functools
import os
import signal
import stat
import sys
from dataclasses import dataclass
from typing import List, Optional


from tensorscope.exitcodes import ExitCode



DEVICE_MODES = ("auto", "cpu", "cuda")
FAIL_ON = ("hazard", "diagnosis")

# NOTE [Arguments after the program]
# `tensorscope run [OPTIONS] PROGRAM [ARGS...]` reads like `python [OPTIONS] PROGRAM [ARGS...]`:
# click stops parsing options at the first positional argument (allow_interspersed_args=False),
# so everything after PROGRAM, `--help` and `-o` included, reaches the program untouched.
# Unknown options *before* PROGRAM stay usage errors (exit 2). A `--` before PROGRAM ends
# tensorscope's options (a program named `-x.py`); a `--` right after PROGRAM is dropped once,
# as earlier releases documented `tensorscope run prog.py -- ARGS`.
_PROGRAM_CONTEXT = {"allow_interspersed_args": False}


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def _err(text: str) -> None:
    sys.stderr.write(f"tensorscope: {text}\n")
    sys.stderr.flush()


# NOTE [One place for errors]
# A command's body is the program: it parses nothing of its own, returns its exit code and raises
# UsageError for bad input. `_command` wraps every command once: a UsageError becomes one line on
# stderr and exit 2, any other exception "internal error" and exit 4, or, with --traceback, the
# exception itself (as httpie and pip-audit do: `main()` with error handling wraps `program()`
# without). click's own parsing errors, before a command runs, are main()'s.
def _guarded(body, params: dict) -> int:
    """``body(**params)``'s exit code, its errors handled as NOTE [One place for errors] says."""
    try:
        code = body(**params)
    except UsageError as e:
        _err(str(e))
        code = ExitCode.USAGE
    except Exception:
        if params.get("traceback_"):
            raise
        _err("internal error (run again with --traceback and report it)")
        code = ExitCode.INTERNAL
    return int(code)


def _command(body):
    """``body`` as a typer command (see NOTE [One place for errors])."""
    import typer

    @functools.wraps(body)  # typer reads the parameters through __wrapped__
    def command(**params):
        raise typer.Exit(_guarded(body, params))

    return command


@dataclass(frozen=True)
class Request:
    """One `run` / `explain` of a program, as the command line asked for it."""

    command: str
    program: str  # a path, "-" (stdin) or, with module=True, a module name
    args: tuple
    module: bool = False
    json: bool = False
    output: Optional[str] = None
    device: str = "auto"
    timeout: Optional[float] = None
    ops: bool = False
    traceback: bool = False
    fail_on: Optional[str] = None
    all_ranks: bool = False
    check_values: bool = False  # run --check-values: explain's saved-tensor hooks and fingerprints
    # what the text report shows (the JSON keeps every fact whatever these say)
    full: bool = False
    tensor: Optional[str] = None
    line: Optional[str] = None
    report: bool = False
    message: Optional[str] = None  # explain --message TEXT: the error text to explain (nothing runs)

    def view(self) -> dict:
        """The text renderer's options."""
        view = dict(full=self.full, tensor=self.tensor, line=self.line)
        if self.command == "explain":
            view["report"] = self.report
        return view


def _version_callback(value: bool) -> None:
    import typer

    if value:
        sys.stdout.write(_version_line() + "\n")
        raise typer.Exit(ExitCode.OK)


def _version_line() -> str:
    """`tensorscope X (torch Y)`, read from the installed metadata: torch is not imported (start-up)."""
    from importlib import metadata

    from tensorscope.version import __version__

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "not installed"
    return f"tensorscope {__version__} (torch {torch_version})"


# NOTE [The command line without typer]
# typer and click (about 0.05 s of imports and parsing, before torch) are needed only for help,
# completion and usage errors. `main()` parses the common forms of `run` and `explain` itself
# (`_fast_params`: the options below, each at most once, before a PROGRAM that is not `-`, no
# `--`, no `--help`, `--traceback`, `--message` or shell completion) into the very parameters
# typer would give the same command body; anything else, an error included, goes to the typer
# app, built on first use, which says and exits as it always has.
_FLAGS = {"run": {"--json": "json_", "-m": "module", "--module": "module", "--ops": "ops",
                  "--check-values": "check_values", "--all-ranks": "all_ranks", "--full": "full"},
          "explain": {"--json": "json_", "-m": "module", "--module": "module", "--all-ranks": "all_ranks",
                      "--full": "full", "--report": "report"}}
_VALUED = {"-o": "output", "--output": "output", "--device": "device", "--timeout": "timeout",
           "--fail-on": "fail_on", "--tensor": "tensor", "--line": "line"}


def _fast_params(argv: list) -> Optional[tuple]:
    """``(command body, params)`` for a common command line, else None (typer parses it)."""
    if len(argv) < 2 or argv[0] not in _FLAGS or "--" in argv:
        return None
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):  # click's shell completion
        return None
    flags = _FLAGS[argv[0]]
    params: dict = {}
    i = 1
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-") or token == "-":
            break
        name, eq, value = token.partition("=")
        if name in _VALUED:
            if not eq:
                i += 1
                if i >= len(argv):
                    return None
                value = argv[i]
            if value.startswith("-"):
                return None
            key = _VALUED[name]
        elif token in flags:
            key, value = flags[token], True
        else:
            return None
        if key in params:
            return None
        params[key] = value
        i += 1
    if i >= len(argv) or argv[i] == "-":
        return None
    params["program"] = argv[i]
    params["args"] = argv[i + 1:]
    return (_run if argv[0] == "run" else _explain), params


def _run(program=None, args=None, module=False, json_=False, output=None, device="auto", timeout=None, ops=False,
         check_values=False, fail_on=None, all_ranks=False, traceback_=False, full=False, tensor=None,
         line=None) -> int:
    """The body of `run` (see the command's help in ``_typer_app``)."""
    if program is None:
        raise UsageError("run needs a PROGRAM (or -m MODULE) (see 'tensorscope run --help')")
    return _main(_request("run", program, args, module=module, json=json_, output=output, device=device, timeout=timeout,
                   ops=ops, traceback=traceback_, fail_on=fail_on, all_ranks=all_ranks, full=full, tensor=tensor,
                   line=line, check_values=check_values))


def _explain(program=None, args=None, module=False, message=None, json_=False, output=None, device="auto",
             timeout=None, fail_on=None, all_ranks=False, traceback_=False, full=False, tensor=None, line=None,
             report=False) -> int:
    """The body of `explain` (see the command's help in ``_typer_app``)."""
    if message is not None or (program == "-" and not module):
        if message is not None and program is not None:
            raise UsageError("give either a program, - (error text on stdin) or --message, not two of them")
        if args:  # nothing runs, so nothing takes arguments: these were meant as options
            raise UsageError(f"options go before '-': tensorscope explain [OPTIONS] - (got {' '.join(args)!r} after it)")
        return _explain_text(_request("explain", program or "-", [], message=message, json=json_, output=output,
                                      traceback=traceback_, fail_on=fail_on))
    if program is None:
        raise UsageError("explain needs a program, -m MODULE, - (an error text on stdin) or --message TEXT")
    if not module and program.endswith(".json"):  # a saved report: explain it again, run nothing
        if args:
            raise UsageError(f"a saved report runs nothing, so it takes no arguments (got {' '.join(args)!r} after it)")
        return _reexplain(_request("explain", program, [], json=json_, output=output, traceback=traceback_,
                                   fail_on=fail_on, full=full, tensor=tensor, line=line, report=report))
    return _main(_request("explain", program, args, module=module, json=json_, output=output, device=device,
                          timeout=timeout, traceback=traceback_, fail_on=fail_on, all_ranks=all_ranks, full=full,
                          tensor=tensor, line=line, report=report))


@functools.lru_cache(maxsize=None)
def _typer_app():
    """The typer app of every command (help, completion, usage errors): see NOTE [The command line without typer]."""
    import typer

    app = typer.Typer(
        add_completion=True,  # --install-completion / --show-completion (typer's own)
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        help="Inspect what a PyTorch program does to its tensors: storage sharing, version counters, "
        "autograd state, and the line behind every backward failure.",
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                     help="Print tensorscope's and torch's versions and exit."),
    ) -> None:
        """Inspect what a PyTorch program does to its tensors: storage sharing, version counters,
        autograd state, and the line behind every backward failure."""

    _PROGRAM = typer.Argument(None, metavar="PROGRAM", show_default=False,
                              help="The program to run (- reads it from stdin), or with -m the module.")
    _PROG_ARGS = typer.Argument(None, help="Everything after PROGRAM goes to the program untouched.", show_default=False)
    _MODULE = typer.Option(False, "-m", "--module", help="Run the module PROGRAM as `python -m PROGRAM ARGS` does (-m MODULE [ARGS...]).")
    _JSON = typer.Option(False, "--json", help="Print one JSON document on stdout (the program's stdout goes to stderr).")
    _OUTPUT = typer.Option(None, "--output", "-o", help="Write the report to FILE (JSON if it ends in .json) and leave the program's output untouched.")
    _DEVICE = typer.Option("auto", "--device", help="auto: change nothing; cpu: run CUDA code on the CPU; cuda: make CUDA the default device.")
    _TIMEOUT = typer.Option(None, "--timeout", help="Stop the program after SECONDS (exit 124); the report is partial.")
    _FAIL_ON = typer.Option(None, "--fail-on", help="Exit 5 when something is found: hazard (a hazard) or diagnosis (a failure diagnosis or a hazard).")
    _ALL_RANKS = typer.Option(False, "--all-ranks", help="Under torchrun, print every rank's report (default: rank 0 only).")
    _TRACEBACK = typer.Option(False, "--traceback", help="Show tensorscope's own traceback on an internal error.")
    _FULL = typer.Option(False, "--full", help="Print the complete report: every tensor, storage and event (JSON: the full form, not the compact one).")
    _TENSOR = typer.Option(None, "--tensor", help="Print one tensor's history, aliases and version changes (a name or an id like t3).")
    _LINE = typer.Option(None, "--line", help="Print what one source line did (FILE:LINE or LINE).")

    @app.command(context_settings=_PROGRAM_CONTEXT)
    @_command
    def run(
        program: Optional[str] = _PROGRAM,
        args: Optional[List[str]] = _PROG_ARGS,
        module: bool = _MODULE,
        json_: bool = _JSON,
        output: Optional[str] = _OUTPUT,
        device: str = _DEVICE,
        timeout: Optional[str] = _TIMEOUT,
        ops: bool = typer.Option(False, "--ops", help="Also record one event per aten op (slower; see the benchmark)."),
        check_values: bool = typer.Option(False, "--check-values", help="Check the bytes of every saved tensor at backward, as explain does (registers saved-tensor hooks; see the benchmark)."),
        fail_on: Optional[str] = _FAIL_ON,
        all_ranks: bool = _ALL_RANKS,
        traceback_: bool = _TRACEBACK,
        full: bool = _FULL,
        tensor: Optional[str] = _TENSOR,
        line: Optional[str] = _LINE,
    ) -> int:
        """Run PROGRAM as `python PROGRAM ARGS` would, then report its tensors, aliases, versions and autograd events."""
        return _run(program=program, args=args, module=module, json_=json_, output=output, device=device,
                    timeout=timeout, ops=ops, check_values=check_values, fail_on=fail_on, all_ranks=all_ranks,
                    traceback_=traceback_, full=full, tensor=tensor, line=line)

    @app.command(context_settings=_PROGRAM_CONTEXT)
    @_command
    def explain(
        program: Optional[str] = typer.Argument(None, metavar="PROGRAM", show_default=False,
                                                help="A program to run and explain (with -m a module), a saved report (FILE.json) to explain again, or - to read an error text from stdin."),
        args: Optional[List[str]] = _PROG_ARGS,
        module: bool = _MODULE,
        message: Optional[str] = typer.Option(None, "--message", help="Explain this error text (nothing is run)."),
        json_: bool = _JSON,
        output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the report to FILE and leave the program's output untouched."),
        device: str = typer.Option("auto", "--device", help="As for run."),
        timeout: Optional[str] = typer.Option(None, "--timeout", help="As for run."),
        fail_on: Optional[str] = _FAIL_ON,
        all_ranks: bool = _ALL_RANKS,
        traceback_: bool = _TRACEBACK,
        full: bool = _FULL,
        tensor: Optional[str] = _TENSOR,
        line: Optional[str] = _LINE,
        report: bool = typer.Option(False, "--report", help="Print the report after a clean verdict too."),
    ) -> int:
        """Explain the failure that ended PROGRAM (or a pasted error text): the line, the alias, the node, the fix.

        Unlike run, explain registers saved-tensor hooks to learn the saving line, the version at save and silent writes. A program that inspects saved variables can see them: grad_fn._raw_saved_x.unpack_hook is tensorscope's, _raw_saved_x.register_hooks refuses a second pair of hooks, grad_fn._saved_x is a new tensor object (`is` the input is False), and a __torch_dispatch__ subclass sees one aten.detach per saved input unpacked. Use run for such programs: it registers none.
        """
        return _explain(program=program, args=args, module=module, message=message, json_=json_, output=output,
                        device=device, timeout=timeout, fail_on=fail_on, all_ranks=all_ranks, traceback_=traceback_,
                        full=full, tensor=tensor, line=line, report=report)

    return app


def __getattr__(name: str):
    if name == "app":  # `from tensorscope.cli import app` (typer's CliRunner)
        return _typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _request(command: str, program: str, args, **options) -> Request:
    """Check the options (one-line usage errors, exit 2) and freeze them into a Request.

    ``options`` are Request's fields; a new option of run/explain is a Request field, a
    parameter of the command, and (if it needs one) a check here.
    """
    json_, output, device = options.get("json"), options.get("output"), options.get("device", "auto")
    fail_on, timeout, module = options.get("fail_on"), options.get("timeout"), options.get("module")

    def usage(text):
        raise UsageError(text)

    args = list(args or [])
    if args[:1] == ["--"]:  # see NOTE [Arguments after the program]
        args = args[1:]
    if json_ and output is not None:
        usage("--json and --output cannot be combined")
    if output is not None:
        options["output"] = checked_output(output)
    if device not in DEVICE_MODES:
        usage(f"--device must be one of {', '.join(DEVICE_MODES)}, not '{device}'")
    if fail_on is not None and fail_on not in FAIL_ON:
        usage(f"--fail-on must be one of {', '.join(FAIL_ON)}, not '{fail_on}'")
    if timeout is not None:
        try:
            timeout = float(timeout)
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            usage("--timeout must be a positive number of seconds")
        options["timeout"] = timeout
    if module and (not program or program == "-"):
        usage("-m needs a module name")
    if command == "run" and fail_on is not None:
        # a hazard is a saved tensor's bytes changed without a version bump: only the value check sees it
        options["check_values"] = True
    return Request(command=command, program=program, args=tuple(args), **options)


def _main(req: Request) -> int:
    """`run` / `explain` of a program: run it, write its report, and return the exit status."""
    source = None
    if not req.module:  # before importing torch (2 s): a wrong path is refused at once
        source = _read_program(req.program)
    from tensorscope.session import Session
    # --- device check (tensorscope/instrument/device.py): --device cuda needs a usable GPU
    if req.device == "cuda":
        from tensorscope.instrument.device import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            raise UsageError(reason)
    # --- end device check
    session = Session(command=req.command, program=req.program, argv=list(req.args), source=source,
                      json_mode=req.json, device=req.device, timeout=req.timeout, ops=req.ops,
                      module=req.module, check_values=req.check_values)
    written = verdict = None
    try:
        result = session.execute(hold_collector=True, on_abrupt_end=lambda r: _abrupt_end(r, req))
        if result.doc is not None:
            written = _emit(result.doc, req)
            verdict = _verdict(result.doc, req)
            result.doc = None  # freed before the collector is on again (see Session.resume_collector)
    finally:
        session.resume_collector()
        session.release_signals()  # dies by a signal that came while the report was written
    if verdict is None:  # a forked child of the program returned: it exits as python's would, no report
        return result.exit_status if result.exit_code is None else result.exit_code
    if result.timed_out:
        _err(f"the program did not finish within {req.timeout:g} s and was stopped; the report is partial")
    return _exit(result, req, verdict, written)


def _abrupt_end(result, req: Request) -> Optional[int]:
    """The program ended the process itself (``os._exit``, SIGTERM, SIGHUP), or --timeout ended it: write the
    report now and say which exit status replaces ``os._exit``'s, if any (see NOTE [Ending as python ends])."""
    try:
        if result is None:
            raise RuntimeError("the report could not be built")
        written = _emit(result.doc, req, raw=True)
        fail_on_found, found = _verdict(result.doc, req)
    except Exception:
        _err("internal error: the report was not written (report it; --traceback cannot show it here)")
        return ExitCode.INTERNAL
    if result.timed_out:  # the program outlived --timeout's grace (NOTE [--timeout ends the run] in runner.py)
        _err(f"the program did not finish within {req.timeout:g} s and was stopped; the report is partial")
    if not written:
        return ExitCode.NOT_WRITTEN
    if result.timed_out:
        return ExitCode.TIMEOUT
    if fail_on_found:
        return ExitCode.FAIL_ON
    if req.command == "explain":
        return ExitCode.FOUND if found else ExitCode.OK
    return None


def _reexplain(req: Request) -> int:
    """`tensorscope explain report.json`: diagnose a saved report again from its recording.

    Nothing runs. Exit codes as for explain: 0 nothing found, 1 a diagnosis or a hazard, 5 with
    --fail-on; 2 when the file is not a report this version can re-explain (schema_version 1 has
    no recording).
    """
    import json
    from types import SimpleNamespace

    try:
        with open(req.program, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise UsageError(f"can't open file '{req.program}': no such file")
    except IsADirectoryError:
        raise UsageError(f"'{req.program}' is a directory, not a report")
    except OSError as e:
        raise UsageError(f"can't open file '{req.program}': {e.strerror}")
    except (ValueError, RecursionError):  # JSONDecodeError and undecodable bytes
        raise UsageError(f"'{req.program}' is not a JSON file (a saved report is written by `explain -o report.json PROG`)")
    from tensorscope import compact, diagnose

    try:
        if isinstance(doc, dict):
            doc = compact.expand(compact.upgrade(doc))
        diagnose.reexplain(doc)
    except ValueError as e:
        raise UsageError(f"'{req.program}': {e}")
    written = _emit(doc, req)
    # session.Result's fields (session imports torch, which nothing here needs)
    return _exit(SimpleNamespace(exit_status=0, interrupted=False, timed_out=False, os_exit=False), req,
                 _verdict(doc, req), written)


def _explain_text(req: Request) -> int:
    """`tensorscope explain -` / `--message TEXT`: explain a pasted error text; nothing runs.

    Exit 1 when the text is a failure tensorscope knows (5 with --fail-on diagnosis: a pasted
    failure is a diagnosis, never a hazard), 3 when it is not, 2 when there is no text, 6 when the
    report cannot be written.
    """
    from tensorscope import explain_text

    text = req.message if req.message is not None else sys.stdin.buffer.read().decode("utf-8", "replace")
    if not text.strip():
        raise UsageError("no error text given (pipe a traceback into `tensorscope explain -` or pass --message TEXT)")
    doc = explain_text.document(text)
    if doc["diagnosis"] is None:
        _err(explain_text.UNRECOGNISED)
        if req.json:
            _emit(doc, req)
        return ExitCode.UNRECOGNISED
    if not _emit(doc, req):
        return ExitCode.NOT_WRITTEN
    return ExitCode.FAIL_ON if req.fail_on == "diagnosis" else ExitCode.FOUND


# --- torchrun: one report per rank ------------------------------------------------------------


def rank_path(path: str, rank: int) -> str:
    """`r.json` -> `r.rank0.json`, `report` -> `report.rank0`: each rank writes its own file."""
    head, tail = os.path.split(path)
    stem, dot, ext = tail.rpartition(".")
    name = f"{stem}.rank{rank}.{ext}" if dot and stem else f"{tail}.rank{rank}"
    return os.path.join(head, name)


def _emit(doc: dict, req: Request, raw: bool = False) -> bool:
    """Write the report where it was asked for: stdout (text or JSON) or a file; False when the file
    could not be written (the message is said here).

    Under torchrun each rank writes its own file (`r.rank0.json`, ...); on the terminal only
    rank 0 prints, headed "rank 0", unless --all-ranks. ``raw``: the program ended the process
    itself, so the report goes to file descriptor 1 past ``sys.stdout``, whose buffer python
    would have lost (see NOTE [Ending as python ends]).
    """
    from tensorscope.render import form_for_path, render

    rank = (doc.get("distributed") or {}).get("rank")
    output = req.output
    if output is not None:
        if rank is not None:
            output = rank_path(output, rank)
        form = form_for_path(output)

        def write(f):
            if form == "json":  # streamed: a large document is never held twice
                from tensorscope.render import json as json_form

                json_form.write(doc, f, full=req.full)
            else:
                f.write(render(doc, form, width=100, color=False, **req.view()))

        failure = write_report(output, write)
        if failure is not None:
            _err(f"can't write the report to '{output}': {failure}")
        return failure is None
    if rank is not None and rank != 0 and not req.all_ranks:
        return True
    try:
        _print_report(doc, req, rank, raw)
    except OSError as e:  # stdout closed, on a full disk, or a pipe whose reader left (`| head`)
        _stdout_lost(e)
        return False
    return True


def _stdout_lost(e: OSError) -> None:
    """The report could not be printed: say so, and point stdout at /dev/null so that the interpreter's
    last flush of it says nothing more (python's own advice for a closed pipe)."""
    _err(f"can't print the report on stdout: {e.strerror or e}")
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _print_report(doc: dict, req: Request, rank, raw: bool) -> None:
    """The report on stdout (see _emit)."""
    from tensorscope.render import render

    if sys.stdout is None:  # file descriptor 1 was closed when python started (`>&-`)
        raise OSError(9, "stdout is closed")

    if req.json:
        text = render(doc, "json", full=req.full)
    elif doc["message"] is not None:  # a pasted error text's panel: 100 columns, no colour, as in a file
        text = render(doc, "text", width=100, color=False)
    else:
        # rich detects the terminal: width (COLUMNS), colour (NO_COLOR, FORCE_COLOR), links
        from rich.console import Console

        from tensorscope.render.text import renderables

        console = Console(highlight=False, soft_wrap=False, emoji=False, markup=False)
        with console.capture() as captured:
            for r in renderables(doc, **req.view()):
                console.print(r)
        text = captured.get()
        if rank is not None:
            text = f"rank {rank}\n{text}"
    # one write: the ranks' reports share the terminal and must not interleave line by line
    if raw:
        _write_fd(1, text.encode(getattr(sys.stdout, "encoding", None) or "utf-8", "replace"))
        return
    # faults21: past sys.stdout's buffer, as the raw path: a signal whose handler returns (a held Ctrl-C, the program's
    # own handler noted) during a write that blocks on a full pipe cut python's buffered write short, without an
    # error (sys.stdout.write of 250 kB: 64 KiB arrived, 3.11 and 3.12, measured); os.write's loop goes on
    try:
        fd = sys.stdout.fileno()
        encoding, errors = sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is both
        fd = None
    if fd is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        sys.stdout.flush()
        _write_fd(fd, text.encode(encoding, errors))


def _write_fd(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


# --- -o FILE: checked before the program, written atomically ------------------------------------

# NOTE [Atomic report]
# `-o FILE` is checked before the program starts (its folder exists and is writable, FILE is not a
# folder, and the temporary file can be made there: made and removed at once), so a wrong path costs nothing; a relative FILE is made absolute against the folder
# tensorscope started in, wherever the program `os.chdir`s to. The report is written to a new
# file beside FILE (`.FILE.<pid>.tmp`, the mode FILE has or the umask gives) and renamed over FILE
# with os.replace only once complete: a full disk, a file size limit or a kill mid-write leaves the
# previous FILE as it was (a kill may leave the `.tmp` file). Something that is not a regular file
# (/dev/stdout, a FIFO, /dev/full) is written in place.


def checked_output(output: str) -> str:
    """``-o FILE`` made absolute, once its folder is known to exist and be writable (else UsageError)."""
    path = os.path.abspath(output)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise UsageError(f"can't write the report to '{output}': it is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"can't write the report to '{output}': no such directory '{folder}'")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"can't write the report to '{output}': {_refused(path)}")
    if _is_regular_or_new(path) and not os.access(folder, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _refused(folder) == "read-only file system" else "is not writable"
        raise UsageError(f"can't write the report to '{output}': the directory '{folder}' {why}")
    why = _cannot_create_beside(path)
    if why:
        raise UsageError(f"can't write the report to '{output}': {why}")
    return path


def _refused(path: str) -> str:
    """Why os.access refused to write ``path``: its file system is mounted read-only, or the permissions."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def _cannot_create_beside(path: str) -> Optional[str]:
    """Why the temporary file of ``write_report`` cannot be made beside ``path``, or None. os.access
    answers for root from the permission bits alone, where /proc, /sys or an NFS export with
    root_squash still refuse a new file: only making one (and removing it) tells."""
    real = os.path.realpath(path)
    if not _is_regular_or_new(real):
        return None
    folder, name = os.path.split(real)
    probe = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def _is_regular_or_new(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def write_report(path: str, write) -> Optional[str]:
    """``write(f)`` into ``path`` atomically (see NOTE [Atomic report]); None, or why it failed."""
    path = os.path.realpath(path)  # through a symlink, as open() writes
    try:
        if not _is_regular_or_new(path):
            with open(path, "w", encoding="utf-8") as f:
                write(f)
            return None
        folder, name = os.path.split(path)
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies, as for open()
    except OSError as e:
        return e.strerror or str(e)
    try:
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # an existing file keeps its mode
        except FileNotFoundError:
            pass
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            return f"{e.strerror or e}; the previous file is untouched"
        raise
    return None


def _found(doc: dict, fail_on: Optional[str]) -> bool:
    """--fail-on: `hazard` triggers on hazards only, `diagnosis` on a failure diagnosis or a hazard."""
    if fail_on is None:
        return False
    hazards = bool(doc.get("hazards"))
    if fail_on == "hazard":
        return hazards
    return hazards or doc.get("diagnosis") is not None


def _verdict(doc: dict, req: Request) -> tuple[bool, bool]:
    """(whether --fail-on found something, whether explain found a diagnosis, a hazard or a failed child
    process: see NOTE [Child processes])."""
    failed_child = any(c.get("failed") for c in (doc.get("program") or {}).get("children") or [])
    return _found(doc, req.fail_on), req.command == "explain" and (_found(doc, "diagnosis") or failed_child)


def _exit(result, req: Request, verdict: tuple[bool, bool], written: bool = True) -> int:
    """The exit status of a run or an explain; a program that died by SIGINT ends tensorscope the
    same way, here (os._exit and the other signals end it in the session: NOTE [Ending as python ends])."""
    fail_on_found, found = verdict
    if result.interrupted:
        # Die by SIGINT like python does, so shells see 130 and callers see -2.
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        return ExitCode.INTERRUPTED
    if not written:
        return ExitCode.NOT_WRITTEN
    if result.timed_out:
        return ExitCode.TIMEOUT
    if fail_on_found:
        return ExitCode.FAIL_ON
    if req.command == "explain":
        if getattr(result, "exit_code", None) is not None:  # python's own text for it (NOTE [A status beyond a C long])
            from tensorscope.exits import interpreter_exit_text
            interpreter_exit_text(result.exit_code)
        return ExitCode.FOUND if found else ExitCode.OK
    # an int beyond a C long: sys.exit of it prints and exits as python does (NOTE [A status beyond a C long])
    return result.exit_status if getattr(result, "exit_code", None) is None else result.exit_code


def _read_program(program: str) -> bytes:
    if program == "-":
        return sys.stdin.buffer.read()
    if not os.path.exists(program):
        raise UsageError(f"can't open file '{program}': no such file")
    if os.path.isdir(program):
        raise UsageError(f"'{program}' is a directory, not a Python program")
    try:
        with open(program, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"can't open file '{program}': {e.strerror}")


def main() -> None:
    """Entry point of the `tensorscope` command: one-line usage errors, documented exit codes
    (a command's own errors: see NOTE [One place for errors])."""
    fast = _fast_params(sys.argv[1:])
    if fast is not None:
        try:
            code = _guarded(*fast)
        except KeyboardInterrupt:  # as typer ends a command that a Ctrl-C stopped: exit 130, nothing said
            code = ExitCode.INTERRUPTED
        sys.exit(int(code or 0))
    import typer

    try:  # the click typer uses: typer 0.22+ vendors its own (typer._click) even where click is installed
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    no_args = getattr(exceptions, "NoArgsIsHelpError", ())  # click 8.2+; () catches nothing
    abort = getattr(exceptions, "Abort", None) or typer.Abort  # typer 0.22+ keeps Abort in typer.exceptions

    try:
        code = _typer_app()(standalone_mode=False)
    except no_args as e:
        sys.stdout.write(e.ctx.get_help() + "\n")
        code = ExitCode.USAGE
    except exceptions.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else "tensorscope"
        _err(f"{e.format_message()} (see '{where} --help')")
        code = ExitCode.USAGE
    except (abort, KeyboardInterrupt):
        _err("interrupted")
        code = ExitCode.INTERRUPTED
    sys.exit(int(code or 0))
