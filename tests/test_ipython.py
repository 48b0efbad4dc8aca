"""The IPython extension, run in IPython's own shell: %load_ext, %%tensorscope, %tensorscope_explain."""

from __future__ import annotations

import builtins
import json
import sys

import pytest
import torch

from _cli import load_report, validate_against_schema
from tensorscope import compat

IPython = pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402
from traitlets.config import Config  # noqa: E402

FAILING_CELL = """\
%%tensorscope --explain
z = (x * 2).sigmoid()
tmp = z.detach()
tmp.mul_(2)
z.sum().backward()
"""


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """One IPython shell for the module; what creating it changes in the process is put back after."""
    saved_main = sys.modules.get("__main__")
    saved_builtins = set(vars(builtins))
    monkey = pytest.MonkeyPatch()
    monkey.setenv("IPYTHONDIR", str(tmp_path_factory.mktemp("ipython")))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.colors = "nocolor"
    shell = InteractiveShell.instance(config=config)
    shell.run_cell("%load_ext tensorscope")
    shell.run_cell("import torch\nx = torch.ones(3, requires_grad=True)")
    yield shell
    InteractiveShell.clear_instance()
    monkey.undo()
    sys.modules["__main__"] = saved_main
    for name in set(vars(builtins)) - saved_builtins:
        delattr(builtins, name)


def run(shell, cell: str, store_history: bool = False):
    """Run a cell; return (result, captured output with the displayed mimebundles)."""
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=store_history)
    return result, captured


def test_the_cell_magic_shows_the_diagnosis_as_text_and_html(shell):
    number = shell.execution_count
    result, out = run(shell, FAILING_CELL, store_history=True)  # as a terminal or a notebook runs it
    assert result.success  # like %%capture, the magic shows the cell's exception and goes on
    shown = out.stdout + out.stderr  # IPython's own traceback of the cell, named as the cell is
    assert f"Cell In[{number}], line 4" in shown and "RuntimeError: one of the variables" in shown
    assert shell.execution_count == number + 1
    [bundle] = [o.data for o in out.outputs]
    assert set(bundle) == {"text/plain", "text/html"}
    text = bundle["text/plain"]
    assert "Diagnosis: inplace-modified-saved-tensor" in text
    assert f"<ipython-input-{number}-" in text  # the file IPython compiled the cell's code under
    assert ":3  tmp.mul_(2)   (through `tmp`)" in text  # the cell's own line numbers
    assert ":1  z = (x * 2).sigmoid()   (SigmoidBackward0)" in text
    assert "alias chain: `tmp = z.detach()` line 2 -> `tmp.mul_(2)` line 3" in text
    assert "Timeline" not in text  # --full shows it
    assert "inplace-modified-saved-tensor" in bundle["text/html"]
    assert bundle["text/html"].startswith('<div class="tensorscope">')  # the HTML report, as a fragment
    # the names of the user namespace, the cell's own and earlier cells' alike
    assert "`z` was saved for backward" in text


def test_explain_the_last_exception(shell):
    run(shell, FAILING_CELL)
    _, out = run(shell, "%tensorscope_explain")
    [bundle] = [o.data for o in out.outputs]
    assert "culprit" in bundle["text/plain"] and ":3  tmp.mul_(2)" in bundle["text/plain"]

    # a failure outside %%tensorscope: explained from its error text
    result, _ = run(shell, "a = torch.ones(2, requires_grad=True)\nb = a.sigmoid()\nb.add_(1)\nb.sum().backward()")
    assert isinstance(result.error_in_exec, RuntimeError)
    _, out = run(shell, "%tensorscope_explain")
    [bundle] = [o.data for o in out.outputs]
    assert "explain: inplace-modified-saved-tensor" in bundle["text/plain"]
    assert "output_of=Sigmoid" in bundle["text/plain"]
    assert "%%tensorscope" in bundle["text/plain"]

    _, out = run(shell, "%tensorscope_explain this is not an error")
    assert "not a failure tensorscope knows" in out.stdout


def test_full_json_and_the_values_of_the_cell(shell):
    _, out = run(shell, "%%tensorscope --full\nw = x.detach()\nw.add_(1)\ny = (x * 3).sum()\ny.backward()\n")
    [bundle] = [o.data for o in out.outputs]
    text = bundle["text/plain"]
    assert "Timeline" in text and "Storage map" in text
    assert "alias w (t" in text and "write add_ through `w`" in text
    expected_x = torch.ones(3) + 1  # w.add_(1) wrote into x's storage
    assert torch.equal(shell.user_ns["x"].detach(), expected_x)
    assert torch.equal(shell.user_ns["x"].grad, torch.full((3,), 3.0))

    _, out = run(shell, "%%tensorscope --json --explain\nv = x.detach()[1:]\nv.zero_();\n")
    doc = load_report(out.stdout)
    assert validate_against_schema(doc) and doc["command"] == "explain"
    by_name = {n: t for t in doc["tensors"] for n in t["names"]}
    assert by_name["v"]["storage"] == by_name["x"]["storage"]
    assert "_" not in by_name and "Out" not in " ".join(by_name)  # IPython's history names are left out


def test_a_clean_cell_and_its_last_expression(shell):
    result, out = run(shell, "%%tensorscope\nq = torch.arange(4.)\nq.view(2, 2)\n")
    assert result.success and result.error_in_exec is None
    texts = [o.data["text/plain"] for o in out.outputs]
    assert "tensor([[0., 1.]," in out.stdout  # the cell's last expression is displayed as usual
    assert len(texts) == 1 and "Diagnosis" not in texts[0] and "exit status 0" in texts[0]
    assert compat.top_pack_hook() is None  # nothing left installed


def test_bad_options_are_one_line_usage_errors(shell):
    for line, words in (("--device=gpu", "device must be 'auto', 'cpu' or 'cuda'"), ("--color", "color")):
        result, out = run(shell, f"%%tensorscope {line}\nnever_set = 1\n")
        assert isinstance(result.error_in_exec, UsageError)
        assert words in str(result.error_in_exec) and "Traceback" not in out.stdout + out.stderr
    assert "never_set" not in shell.user_ns  # the cell did not run


def test_a_terminal_shell_prints_the_text(shell, capsys):
    shell.run_cell("%%tensorscope\nr = torch.zeros(2)\nr.add_(1);\n")
    printed = capsys.readouterr().out
    assert printed.startswith("tensorscope run <ipython-input-") and "<pre>" not in printed
