"""The command line: the only module that parses arguments, owns consoles and picks exit codes."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from tensorscope.exitcodes import ExitCode

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Inspect what a PyTorch program does to its tensors: storage sharing, version counters, "
    "autograd state, and the line behind every backward failure.",
)


DEVICE_MODES = ("auto", "cpu", "cuda")


class UsageError(Exception):
    """Bad input from the user: reported in one line, exit code 2."""


def _err(text: str) -> None:
    sys.stderr.write(f"tensorscope: {text}\n")
    sys.stderr.flush()


_PROG_ARGS = typer.Argument(None, help="Arguments passed to the program (put them after --).", show_default=False)
_FULL = typer.Option(False, "--full", help="Print the complete report: every tensor, storage and event.")
_TENSOR = typer.Option(None, "--tensor", help="Print one tensor's history, aliases and version changes (a name or an id like t3).")
_LINE = typer.Option(None, "--line", help="Print what one source line did (FILE:LINE or LINE).")


@app.command()
def run(
    program: str = typer.Argument(..., help="The program to run, or - to read it from stdin."),
    args: Optional[List[str]] = _PROG_ARGS,
    json_: bool = typer.Option(False, "--json", help="Print one JSON document on stdout (the program's stdout goes to stderr)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the report to FILE (JSON if it ends in .json) and leave the program's output untouched."),
    device: str = typer.Option("auto", "--device", help="auto: change nothing; cpu: run CUDA code on the CPU; cuda: make CUDA the default device."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="Stop the program after SECONDS (exit 124); the report is partial."),
    ops: bool = typer.Option(False, "--ops", help="Also record one event per aten op (slower; see the benchmark)."),
    traceback_: bool = typer.Option(False, "--traceback", help="Show tensorscope's own traceback on an internal error."),
    full: bool = _FULL,
    tensor: Optional[str] = _TENSOR,
    line: Optional[str] = _LINE,
) -> None:
    """Run PROGRAM as `python PROGRAM ARGS` would, then report its tensors, aliases, versions and autograd events."""
    _main("run", program, args or [], json_, output, device, timeout, traceback_, ops,
          view=dict(full=full, tensor=tensor, line=line))


@app.command()
def explain(
    program: Optional[str] = typer.Argument(None, help="A program to run and explain, or - to read an error text from stdin."),
    args: Optional[List[str]] = _PROG_ARGS,
    message: Optional[str] = typer.Option(None, "--message", "-m", help="Explain this error text (nothing is run)."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the report to FILE and leave the program's output untouched."),
    device: str = typer.Option("auto", "--device", help="As for run."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="As for run."),
    traceback_: bool = typer.Option(False, "--traceback", help="Show tensorscope's own traceback on an internal error."),
    full: bool = _FULL,
    tensor: Optional[str] = _TENSOR,
    line: Optional[str] = _LINE,
    report: bool = typer.Option(False, "--report", help="Print the report after a clean verdict too."),
) -> None:
    """Explain the first backward failure of PROGRAM (or of a pasted error text): the line, the alias, the node, the fix.

    Unlike run, explain registers saved-tensor hooks to learn the saving line, the version at save and silent writes. A program that inspects saved variables can see them: grad_fn._raw_saved_x.unpack_hook is tensorscope's, _raw_saved_x.register_hooks refuses a second pair of hooks, grad_fn._saved_x is a new tensor object (`is` the input is False), and a __torch_dispatch__ subclass sees one aten.detach per saved input unpacked. Use run for such programs: it registers none.
    """
    if message is not None or program == "-":
        if message is not None and program is not None:
            _err("give either a program, - (error text on stdin) or --message, not two of them")
            raise typer.Exit(ExitCode.USAGE)
        if message is None:
            text = sys.stdin.buffer.read().decode("utf-8", "replace")
        else:
            text = message
        from tensorscope.explain_text import explain_text

        raise typer.Exit(explain_text(text, json_, output))
    if program is None:
        _err("explain needs a program, - (an error text on stdin) or --message TEXT")
        raise typer.Exit(ExitCode.USAGE)
    _main("explain", program, args or [], json_, output, device, timeout, traceback_,
          view=dict(full=full, tensor=tensor, line=line, report=report))


def _main(command, program, args, json_, output, device, timeout, show_traceback, ops=False, view=None) -> None:
    from tensorscope.session import Session

    if json_ and output is not None:
        _err("--json and --output cannot be combined")
        raise typer.Exit(ExitCode.USAGE)
    if device not in DEVICE_MODES:
        _err(f"--device must be one of {', '.join(DEVICE_MODES)}, not '{device}'")
        raise typer.Exit(ExitCode.USAGE)
    if timeout is not None:
        try:
            timeout = float(timeout)
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            _err("--timeout must be a positive number of seconds")
            raise typer.Exit(ExitCode.USAGE)
    try:
        source = _read_program(program)
    except UsageError as e:
        _err(str(e))
        raise typer.Exit(ExitCode.USAGE)
    # --- device check (tensorscope/instrument/device.py): --device cuda needs a usable GPU
    if device == "cuda":
        from tensorscope.instrument.device import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            _err(reason)
            raise typer.Exit(ExitCode.USAGE)
    # --- end device check
    session = Session(command=command, program=program, argv=args, source=source, json_mode=json_,
                      device=device, timeout=timeout, ops=ops)
    try:
        result = session.execute()
        _emit(result.doc, json_, output, view or {})
    except Exception:
        if show_traceback:
            raise
        _err("internal error (run again with --traceback and report it)")
        raise typer.Exit(ExitCode.INTERNAL)
    if result.timed_out:
        _err(f"the program did not finish within {timeout:g} s and was stopped; the report is partial")
    _exit(result, command)


def _emit(doc: dict, json_: bool, output, view: dict) -> None:
    """Write the report where it was asked for: stdout (text or JSON) or a file."""
    from tensorscope.render import form_for_path, render

    if output is not None:
        form = form_for_path(output)
        try:
            with open(output, "w", encoding="utf-8") as f:
                if form == "json":
                    from tensorscope.render import json as json_form

                    json_form.write(doc, f)
                else:
                    f.write(render(doc, form, width=100, color=False, **view))
        except OSError as e:
            _err(f"can't write the report to '{output}': {e.strerror}")
        return
    if json_:
        sys.stdout.write(render(doc, "json"))
        sys.stdout.flush()
        return
    # rich detects the terminal: width (COLUMNS), colour (NO_COLOR, FORCE_COLOR), links
    from rich.console import Console

    from tensorscope.render.text import renderables

    console = Console(highlight=False, soft_wrap=False, emoji=False, markup=False)
    for r in renderables(doc, **view):
        console.print(r)
    sys.stdout.flush()


def _exit(result, command: str) -> None:
    if result.interrupted:
        # Die by SIGINT like python does, so shells see 130 and callers see -2.
        import signal

        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        raise typer.Exit(ExitCode.INTERRUPTED)
    if result.timed_out:
        raise typer.Exit(ExitCode.TIMEOUT)
    if command == "explain":
        found = result.doc.get("diagnosis") is not None or bool(result.doc.get("hazards"))
        raise typer.Exit(ExitCode.FOUND if found else ExitCode.OK)
    if result.os_exit:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(result.exit_status)
    raise typer.Exit(result.exit_status)


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
    """Entry point of the `tensorscope` command: one-line usage errors, documented exit codes."""
    try:
        from click import exceptions
    except ImportError:  # newer typer releases vendor click
        from typer._click import exceptions

    try:
        code = app(standalone_mode=False)
    except exceptions.NoArgsIsHelpError as e:
        sys.stdout.write(e.ctx.get_help() + "\n")
        code = ExitCode.USAGE
    except exceptions.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else "tensorscope"
        _err(f"{e.format_message()} (see '{where} --help')")
        code = ExitCode.USAGE
    except exceptions.Abort:
        _err("interrupted")
        code = ExitCode.INTERRUPTED
    except KeyboardInterrupt:
        _err("interrupted")
        code = ExitCode.INTERRUPTED
    sys.exit(int(code or 0))
