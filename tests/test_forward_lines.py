"""The forward line of every node of a failing backward under `run` (no saved-tensor hooks), on
every surface: the HTML graph in Chromium, the Python API's document and the pytest plugin.

The truth is torch's own: anomaly mode stores the forward traceback of every node it builds
(tests/programs/forward_lines/truth.py reads it). Where the program's line events exist (Python
3.12 and later, NOTE [Forward lines from line events]) every node's line must be named and right;
on 3.10 and 3.11 a line is named only where recorded events bracket the node, and each line named
must still be right.
"""

from __future__ import annotations

import json
import runpy
from collections import Counter
from pathlib import Path

import pytest
import torch

import tensorscope
from tensorscope import compat

try:
    from _browser import load, needs_browser
    from _cli import REPO, line_of, run_cli, run_python
except ImportError:  # tests/ became a package
    from tests._browser import load, needs_browser
    from tests._cli import REPO, line_of, run_cli, run_python

pytest_plugins = ["pytester"]

DIR = REPO / "tests" / "programs" / "forward_lines"
STEP = DIR / "model_step.py"
EXACT = compat.monitoring is not None  # line events: every node's line is known under run


@pytest.fixture(scope="module")
def truth():
    """[node name, forward line] of every node of the failing graph, from anomaly mode's tracebacks."""
    # forked (tests/_cli.py): truth.py reads only PROGRAM's own frames of each traceback
    rc, out, err = run_python(DIR / "truth.py", str(STEP), "loss", fresh=False)
    assert rc == 0, err
    nodes = [tuple(n) for n in json.loads(out)]
    # the program is what it says: the graph spans the module, the helper, the loop and the expression
    assert ("TanhBackward0", line_of(STEP, "a = torch.tanh(scale(h))")) in nodes
    assert ("MulBackward0", line_of(STEP, "return t * 3")) in nodes
    assert ("AddmmBackward0", line_of(STEP, "h = self.fc(x)")) in nodes
    assert all(line is not None for _, line in nodes)
    return Counter(nodes)


def check_lines(named: list[tuple], truth: Counter) -> None:
    """Each (node name, line) tensorscope gives is a node of the truth; all of them where exact."""
    assert Counter(name for name, _ in named) == Counter(name for name, _ in truth.elements())
    if EXACT:
        assert Counter(named) == truth
        return
    known = Counter(n for n in named if n[1] is not None)
    assert not known - truth, "a line named is not the one that built the node"


def check_saved_by(saved_by: dict) -> None:
    assert saved_by["node"] == "TanhBackward0"
    if EXACT or saved_by["line"] is not None:
        assert saved_by["line"] == line_of(STEP, "a = torch.tanh(scale(h))")
        assert saved_by["code"] == "a = torch.tanh(scale(h))"


@needs_browser
def test_html_graph_names_every_forward_line_under_run(truth, tmp_path):
    page = tmp_path / "report.html"
    rc, _, err, _ = run_cli("run", "-o", str(page), str(STEP))
    assert rc == 1 and "modified by an inplace operation" in err
    dom = load(page, tmp_path)
    nodes = dom.find_all("g", "node")
    named = [(g.attrs["data-name"], int(g.attrs["data-line"]) if g.attrs.get("data-line") else None) for g in nodes]
    check_lines(named, truth)
    stale = [g for g in nodes if "stale" in g.classes]
    assert [g.attrs["data-name"] for g in stale] == ["TanhBackward0"]
    if EXACT:
        assert "forward line not known" not in dom.one("section", "graph").text()
        assert stale[0].attrs["data-line"] == str(line_of(STEP, "a = torch.tanh(scale(h))"))


def test_api_block_names_the_saving_line_and_every_node_line(truth):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with tensorscope.inspect() as rep:  # run's recording: no saved-tensor hooks
            runpy.run_path(str(STEP), run_name="__main__")
    d = rep.diagnosis
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert d["culprit"]["line"] == line_of(STEP, "a.add_(1)")
    check_saved_by(d["saved_by"])
    check_lines([(n["name"], n["line"]) for n in d["graph"]["nodes"]], truth)
    if EXACT:
        assert "not known under `tensorscope run`" not in d["explanation"]
        assert f"line {line_of(STEP, 'a = torch.tanh(scale(h))')} ran" in d["explanation"]


def test_plugin_names_the_saving_line(pytester):
    source = Path(STEP).read_text()
    body = source.split("torch.manual_seed(0)\n", 1)[1]
    test = source.split("torch.manual_seed(0)\n", 1)[0] + "\n\ndef test_step():\n    torch.manual_seed(0)\n" + \
        "".join("    " + ln + "\n" if ln else "\n" for ln in body.splitlines())
    path = pytester.makepyfile(test_step=test)
    result = pytester.runpytest("--tensorscope", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    section = result.stdout.str().split(" tensorscope -", 1)[1]
    assert f"saved by test_step.py:{line_of(path, 'a = torch.tanh(scale(h))')}  a = torch.tanh(scale(h))" in section
    assert f"culprit test_step.py:{line_of(path, 'a.add_(1)')}  a.add_(1)" in section


# -- saving lines that were missed: each program's failing node, as anomaly mode names it ----------

MISSED = {"detach_inplace": "saved-detached-inplace", "sam_step": "inplace-modified-saved-tensor",
          "kept_graph": "inplace-modified-saved-tensor"}


def failing_node(program: Path) -> tuple[str, int]:
    """(node name, forward line) of the node whose backward failed, from anomaly mode's warning."""
    rc, out, err = run_python(DIR / "truth.py", str(program), fresh=False)  # forked, as the truth above
    assert rc == 0 and out, err
    name, line = json.loads(out.splitlines()[-1])
    return name, line


@pytest.mark.parametrize("name", sorted(MISSED))
def test_saving_line_of_missed_failures_under_run(name):
    program = DIR / f"{name}.py"
    node, line = failing_node(program)
    rc, _, err, doc = run_cli("run", "--json", str(program))
    assert rc == 1 and "RuntimeError" in err
    d = doc["diagnosis"]
    assert d["kind"] == MISSED[name]
    assert d["saved_by"]["node"] == node
    if EXACT:
        assert d["saved_by"]["line"] == line
    else:  # only where recorded events bracket the node: never a wrong line
        assert d["saved_by"]["line"] in (None, line)


def test_detached_saved_tensor_names_its_saving_line_under_explain():
    program = DIR / "detach_inplace.py"
    node, line = failing_node(program)
    rc, _, _, doc = run_cli("explain", "--json", str(program))
    d = doc["diagnosis"]
    assert rc == 1 and d["kind"] == "saved-detached-inplace"
    assert (d["saved_by"]["node"], d["saved_by"]["line"]) == (node, line)
    assert d["culprit"]["line"] == line_of(program, "h.detach_()")
    assert f"when line {line} ran" in d["explanation"]


def test_unused_input_names_the_line_that_used_it_without_a_graph():
    # torch's facts: used under no_grad, w is not in the graph; the same code with grad on gives w a gradient
    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        scale = (w * 2).mean()
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        torch.autograd.grad(((x * scale) ** 2).sum(), [x, w])
    scale = (w * 2).mean()  # the ablation: the block's code with grad on
    assert torch.autograd.grad(((x * scale) ** 2).sum(), [x, w])[1] is not None

    program = DIR / "unused_nograd.py"
    rc, _, _, doc = run_cli("run", "--json", str(program))
    d = doc["diagnosis"]
    assert rc == 1 and d["kind"] == "unused-input"
    assert (d["culprit"]["line"], d["culprit"]["alias"]) == (line_of(program, "scale = (w * 2).mean()"), "w")
    assert d["backward"]["line"] == line_of(program, "torch.autograd.grad(loss, [x, w])")
    # a no_grad block that reads other tensors is not blamed: the culprit stays the grad call
    program = DIR / "unused_plain.py"
    rc, _, _, doc = run_cli("run", "--json", str(program))
    d = doc["diagnosis"]
    assert rc == 1 and d["kind"] == "unused-input"
    assert d["culprit"]["line"] == line_of(program, "torch.autograd.grad(loss, [x, w])")
    assert "no_grad" not in d["explanation"]
