"""An exception raised inside a module's forward prints python's traceback under run and explain.

Until the first backward call returns, run and explain hold a global forward hook (NOTE [Steps without
backward] in tensorscope/instrument/growth.py), which sends every module call through the slow path of
torch's ``Module._call_impl`` (``return inner()``, then ``inner``'s ``result = forward_call(...)``) where
python takes the fast path (``return forward_call(...)``). tests/programs/forward_errors.py raises in the
first forward, in the 50th step of an inference loop, in a module with a hook of its own (the slow path
under python too), and ends with an uncaught BaseException from a forward; it prints each caught
traceback and the frames ``traceback.extract_tb`` sees. The reference is python's own run of it.
"""

from __future__ import annotations

import pytest

from _cli import REPO, run_cli, run_python

PROG = "tests/programs/forward_errors.py"


@pytest.fixture(scope="module")
def python_run():
    return run_python(REPO / PROG, fresh=False)


@pytest.mark.parametrize("command", ["run", "explain"])
def test_forward_exceptions_print_pythons_traceback(command, python_run):
    code, out, err = python_run
    assert code == 1 and "Stop: halted inside forward" in err
    assert "in _call_impl" in err and "step 50" in err
    ts_code, ts_out, ts_err, _ = run_cli(command, PROG)
    assert ts_code == code
    assert ts_err == err


# On every release: torch 2.9 and later warn at the compiled module's call while a global module hook
# is registered (tensorscope's must not make that warning), and on 2.2.2 a compiled module with
# parameters failed under run before tensorscope's reads were hidden from torch-function modes.
def test_compiled_module_before_backward_is_as_under_python():
    code, out, err = run_python(REPO / "tests/programs/compile_module_first.py", fresh=False)
    assert code == 0 and out.startswith("compiled module")
    ts_code, ts_out, ts_err, _ = run_cli("run", "tests/programs/compile_module_first.py")
    assert (ts_code, ts_err) == (code, err)
    assert ts_out.startswith(out)  # the program's line, then the report
