"""IPython and Jupyter: ``%load_ext tensorscope``, the ``%%tensorscope`` cell magic and ``%tensorscope_explain``.

The cell magic runs the cell as IPython runs any cell (``shell.run_cell``, in the user
namespace, its last expression displayed, an exception shown by IPython's own
traceback, as ``%%capture`` does) inside a ``tensorscope.inspect()`` recording, then
displays the report as a mimebundle: a notebook shows the HTML, a terminal IPython the
text.
"""

from __future__ import annotations

import re
import sys
import traceback

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

# IPython's own history names: `_`, `__`, `_5`, `_i5`, `_ih`, `In`, `Out`, ... are not the user's tensors
_HISTORY = re.compile(r"^(_+\d*|_i+\d*|_[iod]h|In|Out|_exit_code)$")


@magics_class
class TensorscopeMagics(Magics):
    """``%%tensorscope [--json] [--full] [--explain] [--ops] [--device=cpu]`` and ``%tensorscope_explain``."""

    def __init__(self, shell):
        super().__init__(shell)
        self.last = None  # (report, id and text of the exception that left the cell, or None)

    @cell_magic
    def tensorscope(self, line, cell):
        """Run the cell under tensorscope and show its report (``--full``: the whole report).

        Options as the command line's: ``--json``, ``--full``, ``--explain``, ``--ops``,
        ``--device=auto|cpu|cuda``.

        Example::

            In [2]: %%tensorscope
               ...: z = x.sigmoid(); z.mul_(2); z.sum().backward()
        """
        opts, _ = self.parse_options(line, "", "json", "full", "explain", "ops", "device=")
        from tensorscope.api import recording

        shell = self.shell

        def scope():  # read when the cell has run
            return {k: v for k, v in shell.user_ns.items()
                    if not _HISTORY.match(k) and k not in shell.user_ns_hidden}

        # the cell runs under the number of the cell holding the magic, as IPython shows it (`In [3]`)
        count, saved_count = _cell_number(shell), shell.execution_count
        try:
            block = recording(_cell_filename(shell, cell, count), scope, explain="explain" in opts,
                              device=opts.get("device", "auto"), ops="ops" in opts)
            rep = block.__enter__()
        except (ValueError, RuntimeError) as e:  # a bad --device, or a block already recording otherwise
            raise UsageError(f"%%tensorscope: {e}") from None
        result = None
        shell.execution_count = count
        # IPython hides a last value followed by `;` by looking at the newest input of the history:
        # make that the cell's own text while it runs, as for a cell without the magic
        history = getattr(shell.history_manager, "input_hist_parsed", None)
        if isinstance(history, list):
            history.append(_transformed(shell, cell))
        try:
            result = shell.run_cell(cell, store_history=False)
        finally:
            shell.execution_count = saved_count
            if isinstance(history, list) and history:
                history.pop()
            exc = None if result is None else (result.error_in_exec or result.error_before_exec)
            block.__exit__(None, exc, None)
        self.last = (rep, None if exc is None else (id(exc), str(exc)))
        exc = result = None
        _show(rep, as_json="json" in opts, full="full" in opts)

    @line_magic
    def tensorscope_explain(self, line):
        """Explain the last exception (or the error text given on the line).

        The diagnosis of the last ``%%tensorscope`` cell when that cell raised it, with
        the line and alias that caused it; otherwise tensorscope's explanation of the
        error text, as ``tensorscope explain -`` gives it.

        Example::

            In [3]: %tensorscope_explain
        """
        text = line.strip()
        if not text:
            exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
            if exc is None:
                print("tensorscope: no exception to explain yet (run a cell that fails, or give the error text)")
                return
            if self.last is not None and self.last[1] == (id(exc), str(exc)) and self.last[0].diagnosis:
                _show(self.last[0], as_json=False, full=False)
                return
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            exc = None
        from tensorscope.explain_text import UNRECOGNISED, document
        from tensorscope.render import render

        doc = document(text)
        if doc["diagnosis"] is None:  # the document of an unrecognised text (see explain_text.document)
            print(f"tensorscope: {UNRECOGNISED}")
            return
        doc["message"]["pinpoint"] = "run the cell again under %%tensorscope"
        _display(render(doc, "text"))


def _cell_number(shell) -> int:
    """The execution count of the cell that called the magic (IPython names its code after it)."""
    numbers = getattr(shell.compile, "_filename_map", None) or {}
    frame = sys._getframe(1)
    try:
        while frame is not None:
            number = numbers.get(frame.f_code.co_filename)
            if isinstance(number, int):
                return number
            frame = frame.f_back
    finally:
        del frame
    return shell.execution_count


def _cell_filename(shell, cell: str, number: int) -> str:
    """The filename IPython is about to compile the cell under (whose lines are the user's code)."""
    try:
        return shell.compile.get_code_name(cell, _transformed(shell, cell), number)
    except Exception:  # an IPython without it: the files of the working folder count as the user's
        return "<ipython-cell>"


def _transformed(shell, cell: str) -> str:
    try:
        return shell.transform_cell(cell)
    except Exception:  # run_cell shows the error itself
        return cell


def _show(rep, *, as_json: bool, full: bool) -> None:
    if as_json:
        sys.stdout.write(rep.to_json(full=full))
        return
    from tensorscope.api import html, summary

    doc = rep.doc if full else summary(rep.doc)
    _display(rep.render(full=full), html(doc))


def _display(text: str, html_text: str | None = None) -> None:
    from IPython.display import display

    if html_text is None:
        import html

        html_text = "<pre>" + html.escape(text) + "</pre>"
    display({"text/plain": text.rstrip("\n"), "text/html": html_text}, raw=True)


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(TensorscopeMagics)
