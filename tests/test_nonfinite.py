"""Non-finite values: the corpus of tests/corpus_nonfinite scored, and the real CLI on its programs.

Each corpus program states in its header what plain torch measured (tests/corpus_nonfinite/measure.py):
``# expect: kind=K line=N op=OP phase=P`` or ``# expect: clean``. score.py runs each through explain's
pipeline in one process (torch imported once) and scores origin line, op and phase; every buggy
program has a ``_fixed`` twin that must be clean, and the ``fine_`` programs handle non-finite values
on purpose (NOTE [Non-finite values handled on purpose]). The CLI tests run ``python -m tensorscope``:
every run of this file (tensorscope's and python's) is a fork of one process that imported torch once
(tests/_forked.py), all started by the module fixture ``runs`` for the tests selected.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
import warnings
from collections import namedtuple
from pathlib import Path

import pytest

from _cli import runs_of_selected_tests, validate_against_schema

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "corpus_nonfinite"
sys.path.insert(0, str(CORPUS))
import score  # noqa: E402

# imported before any in-process pytester run (see tests/test_pytest_plugin.py)
import tensorscope.instrument.session  # noqa: E402,F401
import torch  # noqa: E402,F401
from tensorscope import compat  # noqa: E402

pytest_plugins = ["pytester"]

NAN_TEST = """\
import torch


def test_loss_is_finite():
    w = torch.tensor([1.0, -2.0], requires_grad=True)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    score = x @ w
    loss = -torch.log(score).mean()
    assert torch.isfinite(loss), "loss is not finite"
"""


Run = namedtuple("Run", "returncode stdout stderr")


def cli(*args, cwd=CORPUS, stdin=None):
    """A job for run_many: `python -m tensorscope ARGS` in CWD."""
    return ("tensorscope", *args, {"cwd": cwd, "stdin": stdin, "env": {"TENSORSCOPE_NO_PROGRESS": "1"}})


def plain(name, cwd=CORPUS):
    """A job for run_many: `python NAME` in CWD."""
    return ("python", name, {"cwd": cwd})


# Rows normalised by their sum outside autograd, one row blank (0/0), then a log read inline by a matmul.
RATIO_THEN_LOG = """import torch

torch.manual_seed(0)
w = torch.randn(3, 1, requires_grad=True)
x = torch.rand(8, 3)
x[0] = 0.0
p = x / x.sum(dim=1, keepdim=True)
loss = -(torch.log(p) @ w.abs()).mean()
loss.backward()
print(torch.isfinite(w.grad).all().item())
"""


def _jobs(folder: Path) -> dict:
    """Each test's runs by name: {test name: {run name: job}}; programs of the tests' own are written to FOLDER."""
    programs = {"func_nan.py": FUNC_NAN, "shape_error_on_nan.py": SHAPE_ERROR_ON_NAN, "no_mode.py": NO_MODE,
                "dropped_inf.py": DROPPED_INF, "sqrt_where.py": SQRT_WHERE_PRINTS, "padded_deep.py": PADDED_DEEP,
                "loss_scaler.py": LOSS_SCALER, "ratio_then_log.py": RATIO_THEN_LOG, "propensity.py": PROPENSITY,
                "long_product.py": LONG_PRODUCT, "cancelled_skipped.py": CANCELLED_SKIPPED,
                "standardize_unnamed.py": STANDARDIZE_UNNAMED, "standardize_prints.py": STANDARDIZE_PRINTS,
                "unit_rows.py": UNIT_ROWS_IN_FORWARD, "standardize_draws.py": STANDARDIZE_DRAWS}
    for name, text in programs.items():
        (folder / name).write_text(text)
    own = {name: str(folder / name) for name in programs}
    pasted = ("Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    loss.backward()\n"
              "RuntimeError: Function 'AcosBackward0' returned nan values in its 0th output.\n")
    return {
        "test_explain_names_the_origin_and_keeps_the_program_transparent": {
            "explain": cli("explain", "--json", "sqrt_zero_distance.py"), "python": plain("sqrt_zero_distance.py")},
        "test_run_check_values_names_the_origin_and_fail_on": {
            "run": cli("run", "--check-values", "--json", "log_zero_prob.py"),
            "fail_on": cli("run", "--fail-on", "hazard", "log_zero_prob.py"),
            "fail_on_fixed": cli("run", "--fail-on", "hazard", "log_zero_prob_fixed.py")},
        "test_torch_func_transforms_under_explain": {
            "python": plain(own["func_nan.py"], folder), "explain": cli("explain", "--json", own["func_nan.py"], cwd=folder)},
        "test_a_program_that_raises_on_the_nan_gets_the_diagnosis": {
            "explain": cli("explain", "loss_check_raises.py"), "python": plain("loss_check_raises.py")},
        "test_an_op_that_raises_on_a_nan_names_its_origin": {
            "python": plain("normalize_blank_image_bce.py"),
            "explain": cli("explain", "--json", "normalize_blank_image_bce.py"),
            "shape_python": plain(own["shape_error_on_nan.py"], folder),
            "shape_explain": cli("explain", "--json", own["shape_error_on_nan.py"], cwd=folder)},
        "test_sarif_carries_the_origin": {
            "explain": cli("explain", "-o", str(folder / "r.sarif"), "softmax_all_masked.py")},
        "test_explain_a_pasted_anomaly_message": {"explain": cli("explain", "-", stdin=pasted)},
        "test_the_origin_is_read_from_the_graph_without_a_mode_on_the_stack": {
            "python": plain(own["no_mode.py"], folder), "explain": cli("explain", "--json", own["no_mode.py"], cwd=folder)},
        "test_a_listed_node_that_multiplies_a_dropped_inf_is_still_the_origin": {
            "python": plain(own["dropped_inf.py"], folder),
            "explain": cli("explain", "--json", own["dropped_inf.py"], cwd=folder)},
        "test_a_custom_functions_backward_is_named_by_its_op_and_line": {
            "explain": cli("explain", "--json", own["sqrt_where.py"], cwd=folder)},
        "test_a_log_whose_gradient_overflows_names_its_tiny_input": {
            "explain": cli("explain", "--json", "log_prob_underflow.py")},
        "test_a_gradient_sum_that_overflows_is_named_and_the_program_unchanged": {
            "python": plain("grad_sum_tied_embedding_fp16.py"),
            "explain": cli("explain", "--json", "grad_sum_tied_embedding_fp16.py")},
        "test_a_log_of_a_named_nan_is_not_the_origin": {
            "explain": cli("explain", "--json", own["ratio_then_log.py"], cwd=folder)},
        "test_a_cross_entropy_whose_targets_are_all_ignored_says_so": {
            "explain": cli("explain", "--json", "cross_entropy_all_ignored.py")},
        "test_a_float32_gradient_overflowing_in_a_listed_node_is_pinned": {
            "padded_deep.py": cli("explain", "--json", own["padded_deep.py"], cwd=folder),
            "loss_scaler.py": cli("explain", "--json", own["loss_scaler.py"], cwd=folder),
            "propensity.py": cli("explain", "--json", own["propensity.py"], cwd=folder)},
        "test_a_float32_overflow_in_a_later_backward_is_pinned_by_the_loss_or_at_its_recurrence": {
            "long_product.py": cli("explain", "--json", own["long_product.py"], cwd=folder),
            "cancelled_skipped.py": cli("explain", "--json", own["cancelled_skipped.py"], cwd=folder)},
        "test_a_nan_made_in_a_function_whose_result_goes_unnamed_into_a_module_is_named_there": {
            "pure": cli("explain", "--json", own["standardize_unnamed.py"], cwd=folder),
            "prints": cli("explain", "--json", own["standardize_prints.py"], cwd=folder),
            "forward": cli("explain", "--json", own["unit_rows.py"], cwd=folder),
            "draws_python": plain(own["standardize_draws.py"], folder),
            "draws": cli("explain", "--json", own["standardize_draws.py"], cwd=folder)},
    }


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """{test name: {run name: Run}} of the selected tests of this file, all forks of one process
    (tests/_forked.py); the folder of the tests' own programs is under "folder"."""
    folder = tmp_path_factory.mktemp("nonfinite")
    found = runs_of_selected_tests(request, __file__, _jobs(folder))
    return {"folder": folder, **{test: {label: Run(*result[:3]) for label, result in labelled.items()}
                                 for test, labelled in found.items()}}


def test_corpus_shape():
    progs = score.programs()
    buggy = [p for p in progs if not p.name.startswith("fine_") and not p.stem.endswith("_fixed")]
    assert len(buggy) >= 20
    for p in buggy:
        twin = p.with_name(p.stem + "_fixed.py")
        assert twin.exists() and score.expect(twin) == {} and score.expect(p), p.name
        assert "sink" in score.expect(p), p.name  # the first sink that held it, measured by measure.py --sinks
        assert p.read_text().startswith("# Rewritten from "), p.name  # the public report it comes from
    assert len([p for p in progs if p.name.startswith("fine_")]) >= 6


def test_corpus_scored():
    """Origin line, op and phase of each buggy program under explain; under a plain run, the first sink that held
    the value (loss, gradients or parameters: line and step, measured with torch by measure.py --sinks) or the
    raising line; no finding for the twins and the fine programs under either. Each is scored against the truth
    of the running torch (measure.truth, in score.py's process): a program whose header that release does not
    bear out is scored against what torch made there, and named here; on the release the headers were measured
    on, none may differ (the measure and the headers agree)."""
    out = subprocess.run([sys.executable, str(CORPUS / "score.py"), "--json", "--with-run"], capture_output=True,
                         text=True, timeout=1500, env=dict(os.environ, PYTHONPATH=str(REPO)))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for name, d in result["differs"].items():  # in the run's warnings summary: scored, never passed silently
        warnings.warn(f"torch {result['torch']}: {name} differs from its header in {d['fields']}: scored against "
                      f"what this torch made, {d['measured'] or 'clean'}")
    if result["torch"].startswith("2.13."):
        assert not result["differs"], result["differs"]
    acc = result["accuracy"]
    print(f"\nnon-finite corpus: {result['buggy']} buggy, {result['clean']} clean; {acc}; silent {result['silent']}")
    # on every release: before 2.11 no op inside a backward node is named (docs/compatibility.md), yet 0.94 of ops
    # are on 2.2.2 and 0.96 on 2.6.0 and 2.9.1 since the walk reads saved tensors back there (0.85 before that)
    assert min(acc.values()) >= 0.9, result["misses"]
    assert result["silent"] == 1.0, result["misses"]
    run = result["run"]
    print(f"under run: {run['buggy']} buggy, {run['clean']} clean; {run['accuracy']}; silent {run['silent']}")
    assert run["buggy"] >= 20 and run["accuracy"] == {"kind": 1.0, "sink": 1.0}, run["misses"]
    assert run["silent"] == 1.0, run["misses"]


@pytest.fixture(scope="module")
def schema():
    return json.loads((REPO / "tensorscope" / "schema" / "report.schema.json").read_text())


def test_explain_names_the_origin_and_keeps_the_program_transparent(schema, runs):
    """The JSON finding in the diagnosis shape with its nonfinite object; output and status as under python."""
    out, ref = runs["test_explain_names_the_origin_and_keeps_the_program_transparent"].values()
    assert out.returncode == 1  # explain: a hazard found
    assert out.stderr.replace("\r", "") .startswith(ref.stdout)  # --json: the program's stdout goes to stderr
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    assert h["culprit"]["line"] == 9 and h["culprit"]["code"] == "dist = torch.sqrt(sq)"
    nf = h["nonfinite"]
    # the aten op inside a backward node is named from 2.11 (a dispatch mode over backward; docs/compatibility.md)
    aten = "aten.div" if compat.DISPATCH_MODE_OVER_BACKWARD_SAFE else None
    assert (nf["node"], nf["aten"], nf["phase"], nf["value"]) == ("SqrtBackward0", aten, "backward", "inf")
    # the inputs' statistics are torch's: SqrtBackward0 divides by 2 * sqrt(sq), which is 0 for the first pair
    if compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:  # the node's rerun that reads them: from 2.11
        assert any(i["zeros"] == 1 and i["min"] == 0.0 for i in nf["inputs"])
    assert "eps" in h["fix"] or "clamp" in h["fix"]
    assert h["backward"]["line"] == 11


def test_run_check_values_names_the_origin_and_fail_on(schema, runs):
    """run --check-values pins the origin as explain does (the sink at line 13 carries it); --fail-on hazard
    exits 5."""
    out, fail_on, fail_on_fixed = runs["test_run_check_values_names_the_origin_and_fail_on"].values()
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert nf["checked"] == "origins" and nf["sink"]["what"] == "loss" and nf["sink"]["line"] == 13
    assert (h["culprit"]["line"], nf["op"], nf["phase"]) == (11, "aten.log", "forward")
    assert fail_on.returncode == 5
    assert fail_on_fixed.returncode == 0


FUNC_NAN = """\
import torch
from torch.func import grad, hessian, jacfwd


def f(x):
    return torch.log(x).sum()


print(hessian(lambda t: (t.sin() * t ** 3).sum())(torch.tensor([0.5, 1.0], dtype=torch.float64)).tolist())
print(jacfwd(torch.tanh)(torch.tensor([0.0, 1.0])).tolist())
g = grad(f)(torch.tensor([1.0, 0.0, 2.0]))
print(g.tolist())
"""


def test_torch_func_transforms_under_explain(schema, runs):
    """hessian and jacfwd (forward AD: ZeroTensor tangents) run as under python, and a NaN born inside
    torch.func.grad is pinned to its line (NOTE [ZeroTensors inside a dispatch mode])."""
    ref, out = runs["test_torch_func_transforms_under_explain"].values()
    assert ref.returncode == 0 and "inf" in ref.stdout.splitlines()[-1]  # torch: d/dx log(x) at 0 is inf
    assert out.returncode == 1, out.stderr[-2000:]  # a hazard; the program itself exited 0
    # --json: the program's stdout goes to stderr, after what python itself wrote there first (torch 2.15 warns
    # at `torch.func`'s import that torch.jit.script is deprecated, under python as under tensorscope)
    assert out.stderr.replace("\r", "").startswith(ref.stderr.replace("\r", "") + ref.stdout)
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    assert doc["program"]["exit_status"] == 0
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    if compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:  # a NaN made inside a transform is pinned from 2.11 (no mode before)
        assert (h["culprit"]["line"], h["nonfinite"]["op"], h["nonfinite"]["phase"]) == (6, "aten.log", "forward")


def test_a_program_that_raises_on_the_nan_gets_the_diagnosis(runs):
    out, ref = runs["test_a_program_that_raises_on_the_nan_gets_the_diagnosis"].values()
    assert ref.returncode == 1 and ref.stderr.strip().splitlines()[-1] == "ValueError: loss is nan at step 0"
    assert ref.stderr.strip().splitlines()[-1] in out.stderr
    assert "non-finite-value" in out.stdout and "loss_check_raises.py:11" in out.stdout
    assert "clamp" in out.stdout  # log of 0 or negative values: clamp its input


SHAPE_ERROR_ON_NAN = """\
import torch

x = torch.tensor([[0.0, 0.0], [1.0, 2.0]])  # row 0 is 0/0
y = x / x.sum(1, keepdim=True)
w = torch.ones(3, 4, requires_grad=True)
out = y @ w
"""


def test_an_op_that_raises_on_a_nan_names_its_origin(schema, runs):
    """NOTE [An op that raised on a non-finite input]: a 0/0 from a blank image reaches binary_cross_entropy,
    which raises a plain RuntimeError (torch's range check); the origin is the division (measure.py: line 35,
    forward, second batch). A shape error on a line that reads a NaN is not blamed on it."""
    ref, out, shape_ref, shape_out = runs["test_an_op_that_raises_on_a_nan_names_its_origin"].values()
    assert ref.returncode == 1 and ref.stdout == "0 48.026\n"
    assert ref.stderr.strip().splitlines()[-1] == "RuntimeError: all elements of input should be between 0 and 1"
    assert out.stderr.replace("\r", "").startswith(ref.stdout) and ref.stderr.strip() in out.stderr
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    d = doc["diagnosis"]
    assert doc["program"]["exit_status"] == 1
    assert (d["kind"], d["culprit"]["line"], d["nonfinite"]["aten"], d["nonfinite"]["phase"]) == \
        ("non-finite-value", 35, "aten.div", "forward")
    assert "`recon_x`, `x`" in d["explanation"] and "F.normalize" in d["fix"]
    assert "cannot be multiplied" in shape_ref.stderr.strip().splitlines()[-1]
    doc = json.loads(shape_out.stdout)
    assert doc["diagnosis"]["kind"] != "non-finite-value"


def test_sarif_carries_the_origin(runs):
    (out,) = runs["test_sarif_carries_the_origin"].values()
    assert out.returncode == 1, out.stderr[-2000:]  # explain: a hazard found
    log = json.loads((runs["folder"] / "r.sarif").read_text())
    (result,) = [r for r in log["runs"][0]["results"] if r["ruleId"] == "silent-non-finite-value"]
    assert result["level"] == "warning"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 11


def test_explain_a_pasted_anomaly_message(runs):
    (out,) = runs["test_explain_a_pasted_anomaly_message"].values()
    assert out.returncode == 1
    assert "non-finite-value" in out.stdout and "acos" in out.stdout and "clamp" in out.stdout


def test_pytest_plugin_puts_the_origin_in_the_failure_report(pytester):
    pytester.makepyfile(test_nan=NAN_TEST)
    # in a subprocess: an in-process run re-imports modules that other test files share
    result = pytester.runpytest_subprocess("--tensorscope", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    section = out.split(" tensorscope -", 1)[1]
    assert "non-finite-value" in section
    assert "test_nan.py:8  loss = -torch.log(score).mean()" in section  # the origin line, not the assert
    assert "aten.log" in section and "clamp" in section


NO_MODE = """\
import torch

w = torch.tensor([0.5, 0.0, 2.0], requires_grad=True)
h = w * 2
h.register_hook(lambda g: print("modes in backward", torch._C._len_torch_dispatch_stack()))
print("modes in forward", torch._C._len_torch_dispatch_stack())
loss = torch.log(h).sum()
loss.backward()
"""


def test_the_origin_is_read_from_the_graph_without_a_mode_on_the_stack(runs):
    """NOTE [Origins from the graph]: no dispatch mode is on the stack while the program runs (the program sees
    what python shows it), and the NaN's origin is still the log at line 7, with its input's zero."""
    ref, out = runs["test_the_origin_is_read_from_the_graph_without_a_mode_on_the_stack"].values()
    assert "modes in forward 0" in ref.stdout and "modes in backward 0" in ref.stdout
    assert out.stderr.replace("\r", "").startswith(ref.stdout)
    doc = json.loads(out.stdout)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert (h["culprit"]["line"], nf["op"], nf["phase"], nf["value"]) == (7, "aten.log", "forward", "-inf")
    (inp,) = nf["inputs"]
    assert (inp["zeros"], inp["min"], inp["max"]) == (1, 0.0, 4.0)  # h = w * 2, as torch computes it


DROPPED_INF = """\
import torch

torch.ones(2, requires_grad=True).sum().backward()  # a first backward, finite: every node is hooked only there
x = torch.tensor([1.0, 100.0], requires_grad=True)
w = torch.tensor([2.0, 3.0], requires_grad=True)
e = torch.exp(x * 10)  # inf at 1, which the where below drops
y = torch.where(x < 50, e * w, torch.zeros(2))
y.sum().backward()
print(x.grad.tolist(), w.grad.tolist())
"""


def test_a_listed_node_that_multiplies_a_dropped_inf_is_still_the_origin(runs):
    """NOTE [Which nodes' gradients are checked]: a product is not hooked by default, but here the forward made
    an inf that the where dropped and the loss never saw, and MulBackward0 makes the NaN gradient (0 * inf)
    before ExpBackward0 does; a saved non-finite tensor puts the hook back on every node. Truth: anomaly mode."""
    x = torch.tensor([1.0, 100.0], requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    with torch.autograd.detect_anomaly(check_nan=True), pytest.raises(RuntimeError, match="'MulBackward0' returned nan"):
        torch.where(x < 50, torch.exp(x * 10) * w, torch.zeros(2)).sum().backward()
    ref, out = runs["test_a_listed_node_that_multiplies_a_dropped_inf_is_still_the_origin"].values()
    assert out.stderr.replace("\r", "").startswith(ref.stdout)
    (h,) = [h for h in json.loads(out.stdout)["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert (h["culprit"]["line"], nf["node"], nf["phase"], nf["value"]) == (7, "MulBackward0", "backward", "nan")


# Rewritten from pytorch/pytorch#52248 (a custom Function suggested there to keep sqrt's infinite slope at 0 out
# of the gradient): the hand-written backward still takes rsqrt of the zeros, and the mask multiplies inf by 0.
SQRT_WHERE = """\
import torch

torch.manual_seed(0)


class SqrtWhere(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x.clamp_min(0).sqrt(), torch.zeros_like(x))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        half_rsqrt = 0.5 * x.clamp_min(0).rsqrt()
        keep = (x > 0).to(grad.dtype)
        return grad * half_rsqrt * keep


embed = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(embed.parameters(), lr=0.1)
points = torch.randn(6, 4)
for step in range(2):
    opt.zero_grad()
    z = embed(points)
    d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)  # 0 on the diagonal
    loss = -SqrtWhere.apply(d2).mean()
    loss.backward()
    print(step, round(loss.item(), 4), bool(torch.isfinite(embed.weight.grad).all()))
    opt.step()
"""
# the same, telling how many times the Function's backward ran
SQRT_WHERE_PRINTS = SQRT_WHERE.replace("        (x,) = ctx.saved_tensors",
                                       "        print('backward ran')\n        (x,) = ctx.saved_tensors")


def _graph_nodes(root) -> list:
    """Every autograd node of ROOT's graph (torch's own ``next_functions``), each once."""
    nodes, todo = [], [root.grad_fn]
    while todo:
        n = todo.pop()
        if n is not None and n not in nodes:
            nodes.append(n)
            todo.extend(f for f, _ in n.next_functions)
    return nodes


def _first_nonfinite_in_backward(src: str, filename: str):
    """Truth measured with torch alone, on the program's first step: the first node whose gradients go non-finite
    from finite ones (post hooks on every node), and the first op, with the program's line that ran it, whose
    output is non-finite while its inputs are finite (a plain TorchDispatchMode over that backward)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ns: dict = {"__name__": "prog"}
    head = src.split("for step in range(2):")[0]
    exec(compile(head, filename, "exec"), ns)
    z = ns["embed"](ns["points"])
    loss = -ns["SqrtWhere"].apply(((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)).mean()
    nodes = _graph_nodes(loss)
    made = []

    def post(node):
        def hook(grad_inputs, grad_outputs):
            bad = any(g is not None and not torch.isfinite(g).all() for g in grad_inputs)
            if bad and all(g is None or torch.isfinite(g).all() for g in grad_outputs):
                made.append(node.name())
        return hook

    for n in nodes:
        n.register_hook(post(n))
    ops = []

    class FirstOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor)]
            ins = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
            if not ops and any(o.is_floating_point() and not torch.isfinite(o).all() for o in outs) \
                    and all(torch.isfinite(a).all() for a in ins):
                line = [f.lineno for f in traceback.extract_stack() if f.filename == filename][-1]
                ops.append((str(func.overloadpacket), line))
            return out

    with FirstOp():
        loss.backward()
    return (made or [None])[0], (ops or [(None, None)])[0], ns["embed"].weight.grad


@pytest.mark.skipif(not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE, reason="a dispatch mode over backward crashes torch "
                    "before 2.11 (docs/compatibility.md); there the node is named without its op")
def test_a_custom_functions_backward_is_named_by_its_op_and_line(tmp_path, schema, runs):
    """NOTE [A custom Function's backward, watched while it runs]: a NaN made inside the program's own backward
    is named by the Function's node, the aten op inside it and the backward's line, the forward line beside it.
    Truth from torch (hooks on every node, a dispatch mode over the backward), and an ablation: clamping at that
    line above 0 makes the gradients finite. The Function's backward runs once per backward, as under python."""
    prog = tmp_path / "sqrt_where.py"
    prog.write_text(SQRT_WHERE)
    node, (op, line), grad = _first_nonfinite_in_backward(SQRT_WHERE, str(prog))
    assert (node, op, line) == ("SqrtWhereBackward", "aten.rsqrt", 15) and not torch.isfinite(grad).all()
    fixed = SQRT_WHERE.replace("x.clamp_min(0).rsqrt()", "x.clamp_min(1e-12).rsqrt()")
    assert torch.isfinite(_first_nonfinite_in_backward(fixed, str(prog))[2]).all()  # the ablation
    ref = io.StringIO()
    with contextlib.redirect_stdout(ref):
        exec(compile(SQRT_WHERE_PRINTS, str(prog), "exec"), {"__name__": "__main__"})
    line += 1  # the print above it
    (out,) = runs["test_a_custom_functions_backward_is_named_by_its_op_and_line"].values()
    assert out.stderr.replace("\r", "").startswith(ref.getvalue()) and ref.getvalue().count("backward ran") == 2
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert (h["culprit"]["line"], nf["node"], nf["aten"].split(".")[0:2], nf["phase"], nf["step"]) == \
        (line, node, op.split("."), "backward", 0)
    assert h["culprit"]["code"] == "half_rsqrt = 0.5 * x.clamp_min(0).rsqrt()"
    assert "the Function called at line 28" in h["explanation"] and "clamp_min(1e-12).rsqrt()" in h["fix"]
    assert any(i["zeros"] == 6 and i["min"] == 0.0 for i in nf["inputs"])  # the diagonal of d2


# Rewritten from AI-Hypercomputer/maxtext#614 (a deep model whose gradients grow about 100x per layer and hit
# float32's largest value around the 18th layer, at the first step): here the pads are zero rows, LayerNorm's
# 1/sqrt(eps) multiplies their gradient at each layer, and the pads are not left out of the loss.
PADDED_DEEP = """\
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d, bias=False)

    def forward(self, x):
        return x + self.fc(self.ln(x))


vocab, d, depth = 10, 16, 20
model = nn.Sequential(nn.Embedding(vocab, d, padding_idx=0), *[Block(d) for _ in range(depth)],
                      nn.Linear(d, vocab, bias=False))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.tensor([[3, 5, 7, 0, 0, 0], [2, 4, 6, 8, 0, 0]])  # padded with 0
for step in range(2):
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())  # the pads are not ignored
    opt.zero_grad()
    loss.backward()
    print(step, round(loss.item(), 4), all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()))
    opt.step()
"""

# Rewritten from Smerity/sha-rnn#7 (a loss scaler in a training loop): this hand-made one doubles the scale after
# every step and never checks for an overflow; the inputs are not normalised, so the scaled gradient of the
# output layer (g.T @ h) overflows in backward while the scaled loss is still finite.
LOSS_SCALER = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-6)
x = torch.randn(64, 8) * 100  # inputs not normalised
y = x @ torch.randn(8, 1) * 0.01
scale = 2.0 ** 114  # doubled after every step, with no check for an overflow
for step in range(5):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    (loss * scale).backward()
    for p in model.parameters():
        p.grad /= scale
    opt.step()
    scale *= 2.0
    print(step, f"{loss.item():.3g}", all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()))
"""

# a weight of 1e38 from a propensity that underflowed, at step 3 only: the gradients of steps 0-2 are small (40),
# so no backward before it is hooked in full by their size; x @ w's MmBackward0 overflows float32 within step 3
PROPENSITY = """\
import torch

torch.manual_seed(0)
w = torch.randn(3, 1, requires_grad=True)
opt = torch.optim.SGD([w], lr=1e-3)
for step in range(4):
    x = torch.full((4, 3), 100.0)
    y = x @ w.detach() + 0.1  # targets the model nearly fits
    propensity = torch.full((4, 1), 0.5) if step < 3 else torch.tensor([[0.5], [1e-38], [0.5], [0.5]])
    weights = 1.0 / propensity  # inverse propensity weights
    pred = x @ w
    sq = (pred - y) ** 2
    loss = (weights * sq).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
"""


# A long product of per-step growth factors from a tiny start value (a sequence's likelihood ratio): the batches of
# steps 0 and 1 are short, those of steps 2 and 3 long; the forward stays finite (1.6e16), the start's gradient
# passes float32's range inside a chain of MulBackward0 (a listed node), with no saved value past the bound.
LONG_PRODUCT = """\
import torch

logit = torch.full((8,), 0.9, requires_grad=True)
base = torch.full((8,), -60.0, requires_grad=True)
opt = torch.optim.SGD([logit, base], lr=1e-3)
for step in range(4):
    T = 30 if step < 2 else 110
    p = base.exp()
    for t in range(T):
        p = p * (1.0 + torch.sigmoid(logit) * 2)
    loss = p.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
"""

# The same product under a surrogate loss that cancels to 0 (``p - p.detach()``: the gradient of p.mean()), in a loop
# that skips a step whose gradient norm is not finite: the overflow recurs at each long batch.
CANCELLED_SKIPPED = LONG_PRODUCT.replace("    loss = p.mean()\n", "    loss = (p - p.detach()).mean()\n").replace(
    "    opt.step()\n", "    if torch.isfinite(torch.nn.utils.clip_grad_norm_([logit, base], 1e12)):\n        opt.step()\n")


# A hand-written standardisation inside a function whose result goes unnamed into a Linear layer: for a large, nearly
# constant feature E[x^2] - E[x]^2 cancels to a negative number in float32 and the sqrt at line 8 is NaN.
STANDARDIZE_UNNAMED = """\
import torch


def standardize(x):
    \"\"\"Zero mean, unit variance per feature.\"\"\"
    mean = x.mean(dim=0)
    var = (x * x).mean(dim=0) - mean * mean
    return (x - mean) / (var.sqrt() + 1e-5)


lin = torch.nn.Linear(2, 1)
x = torch.tensor([[3000.3, 0.5], [3000.3, -0.5], [3000.3, 1.5], [3000.4, 0.0]])
out = lin(standardize(x))
loss = out.pow(2).mean()
loss.backward()
print("loss", loss.item())
"""
# A helper called inside a model's forward with the forward's own locals, its result straight into a Linear: the
# blank sample of step 2 is divided by its norm of 0 (eps 0.0).
UNIT_ROWS_IN_FORWARD = """\
import torch


def unit_rows(v, eps):
    n = v.norm(dim=1, keepdim=True)
    return v / (n + eps)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)

    def forward(self, x):
        eps = 0.0
        return self.fc(unit_rows(x, eps))


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    x = torch.rand(4, 3)
    if step == 2:
        x[1] = 0.0  # a blank sample
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done", loss.item())
"""
# the same function with an effect of its own (a print): never called a second time
STANDARDIZE_PRINTS = STANDARDIZE_UNNAMED.replace("    return (x - mean)", "    print(\"standardized\")\n    return (x - mean)")
# the same function ending in an op that draws random numbers although its name does not say so (attention with
# dropout_p): the second call must leave the program's next random number as python gives it
STANDARDIZE_DRAWS = STANDARDIZE_UNNAMED.replace(
    "    return (x - mean) / (var.sqrt() + 1e-5)\n",
    "    z = (x - mean) / (var.sqrt() + 1e-5)\n"
    "    return torch.nn.functional.scaled_dot_product_attention(z[None], z[None], z[None], dropout_p=0.5)[0]\n"
).replace("lin = torch.nn.Linear(2, 1)\n", "torch.manual_seed(0)\nlin = torch.nn.Linear(2, 1)\n") + \
    "print(\"next draw\", torch.rand(3).tolist())\n"


def _hook_every_node(root, step, made):
    """Truth with torch alone: post hooks on every node of this backward's graph record the first node whose
    gradients are non-finite while the gradients it received are finite, with the forward line anomaly mode
    recorded for it (``metadata["traceback_"]``)."""
    nodes = _graph_nodes(root)

    def post(node):
        def hook(grad_inputs, grad_outputs):
            if made or not any(g is not None and not torch.isfinite(g).all() for g in grad_inputs):
                return
            if all(g is None or torch.isfinite(g).all() for g in grad_outputs):
                tb = node.metadata.get("traceback_", "")
                tb = "".join(map(str, tb)) if isinstance(tb, list) else tb  # a list of formatted frames on 2.13
                made.append((step, node.name(), int(tb.rsplit('prog.py", line ', 1)[1].split(",")[0])))
        return hook

    for n in nodes:
        n.register_hook(post(n))


def _truth(src, backward_line, root_expr):
    made: list = []
    # one line, so that the program's line numbers stay as they are
    src = src.replace(backward_line, f"    _root = {root_expr}; _hook(_root, step, made); _root.backward()")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode's own warning
        with torch.autograd.detect_anomaly(check_nan=False), contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, "prog.py", "exec"), {"__name__": "__main__", "_hook": _hook_every_node, "made": made})
    return made[0] if made else None


def test_a_log_whose_gradient_overflows_names_its_tiny_input(schema, runs):
    """`-log(softmax(x)[target])` with a probability that underflowed to a denormal: the log is finite, its
    backward (grad / p) is not. The fix names the input near 0, not the incoming gradient's sign (it said `log`
    of negative values, from the gradient of -1/n). Truth from torch: p is positive and 1/p overflows float32."""
    import torch
    p = torch.softmax(torch.tensor([0.0, 100.0]), -1)[0]
    assert 0 < p.item() < 1e-38 and torch.isinf(-0.5 / p)
    (out,) = runs["test_a_log_whose_gradient_overflows_names_its_tiny_input"].values()
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    assert (h["nonfinite"]["node"], h["culprit"]["line"]) == ("LogBackward0", 14)
    assert "negative" not in h["fix"] and "clamp_min" in h["fix"], h["fix"]
    if compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:  # the node's rerun that reads its input: from 2.11
        assert f"{p.item():.3g}" in h["fix"], h["fix"]


def test_a_gradient_sum_that_overflows_is_named_and_the_program_unchanged(schema, runs):
    """NOTE [Gradients the engine adds up]: tied float16 embeddings, whose gradient is the engine's sum of the
    lookup's (line 7) and the output projection's (line 8). Truth from torch: each use's gradient, taken apart with
    autograd.grad, is finite (32768), their float16 sum is not. The program prints what it prints under python
    (the gradients kept for the sum's statistics change nothing), and explain names the sum, both lines, the
    contributions and the backward line."""
    import torch
    emb = torch.full((4, 8), 0.25, dtype=torch.float16, requires_grad=True)
    tokens = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    x, t = emb[tokens], emb.t()
    gx, gt = torch.autograd.grad((x @ t).float().pow(2).mean() * 2.0 ** 19, [x, t])
    by_lookup = torch.zeros_like(emb).index_put_((tokens,), gx, accumulate=True)
    by_head = gt.t()
    assert torch.isfinite(by_lookup).all() and torch.isfinite(by_head).all()
    assert torch.isinf(by_lookup + by_head).all()
    ref, out = runs["test_a_gradient_sum_that_overflows_is_named_and_the_program_unchanged"].values()
    assert out.stderr.replace("\r", "").startswith(ref.stdout)  # --json: the program's stdout goes to stderr
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert (nf["aten"], nf["phase"], nf["value"], h["culprit"]["line"], h["backward"]["line"]) == \
        ("aten.add", "backward", "inf", 7, 11)
    assert [u["line"] for u in nf["summed"]] == [7, 8]
    assert sorted(i["max"] for i in nf["inputs"]) == sorted([by_lookup.max().item(), by_head.max().item()])
    assert "loss scale" in h["fix"] and "float32" in h["fix"]


def test_a_log_of_a_named_nan_is_not_the_origin(schema, runs):
    """`torch.log(p)` read inline by a matmul, where `p = x / x.sum(1)` (no gradient) is already NaN in a blank
    row: the origin is the division at its line, not the log that read `p` (it was named). Truth from torch: the
    row sum is 0 and `p`'s row is 0/0 = NaN before any log; measure.py names line 7 and nothing later."""
    import torch
    torch.manual_seed(0)
    torch.randn(3, 1)
    x = torch.rand(8, 3)
    x[0] = 0.0
    assert x.sum(dim=1)[0].item() == 0 and torch.isnan(x / x.sum(dim=1, keepdim=True))[0].all()
    (out,) = runs["test_a_log_of_a_named_nan_is_not_the_origin"].values()
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    lines = RATIO_THEN_LOG.splitlines()
    assert h["culprit"]["line"] == lines.index("p = x / x.sum(dim=1, keepdim=True)") + 1, h["culprit"]
    assert h["nonfinite"]["aten"] == "aten.div" and "division by 0" in h["fix"], (h["nonfinite"], h["fix"])


def test_a_cross_entropy_whose_targets_are_all_ignored_says_so(schema, runs):
    """`F.cross_entropy(..., ignore_index=PAD)` over a batch of padding only: finite logits, a NaN loss (the mean
    over no counted target). The fix names the cause, not 'clamp the inputs into its domain'. Truth from torch:
    the mean is NaN and the sum over the same targets is 0."""
    import torch
    import torch.nn.functional as F
    logits, y = torch.randn(4, 5), torch.full((4,), -100)
    assert torch.isnan(F.cross_entropy(logits, y)) and F.cross_entropy(logits, y, reduction="sum").item() == 0
    (out,) = runs["test_a_cross_entropy_whose_targets_are_all_ignored_says_so"].values()
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    assert h["culprit"]["line"] == 13 and h["nonfinite"]["phase"] == "forward", h["culprit"]
    assert "every target here is -100" in h["fix"] and "ignore_index" in h["fix"], h["fix"]
    assert "clamp them into its domain" not in h["fix"], h["fix"]


def test_a_float32_gradient_overflowing_in_a_listed_node_is_pinned(tmp_path, schema, runs):
    """NOTE [Gradients that may overflow]: NativeLayerNormBackward0 and AddmmBackward0 are on the no-hook list, and
    their float32 products overflow from finite gradients: in the run's first backward (the padded deep model) and
    in a backward after gradients past finfo.max ** 0.25 (the loss scaler, step 3); MmBackward0 within one later
    backward after small gradients, against a saved weight past finfo.max ** 0.5 (the propensity, step 3). Truth
    from torch (hooks on every node, anomaly mode's forward traceback), and ablations: the pads ignored, the
    scaler's growth stopped, the propensities clipped."""
    cases = [("padded_deep.py", PADDED_DEEP, "    loss.backward()", "loss", "NativeLayerNormBackward0", "native_layer_norm",
              ("tokens.flatten())  # the pads are not ignored", "tokens.flatten(), ignore_index=0)")),
             ("loss_scaler.py", LOSS_SCALER, "    (loss * scale).backward()", "loss * scale", "AddmmBackward0", "mm",
              ("    scale *= 2.0\n", "")),
             ("propensity.py", PROPENSITY, "    loss.backward()", "loss", "MmBackward0", "mm",
              ("1.0 / propensity ", "1.0 / propensity.clamp_min(1e-3) "))]
    for name, src, backward_line, root_expr, want_node, want_op, (bug, fixed) in cases:
        truth = _truth(src, backward_line, root_expr)
        assert truth is not None and truth[1] == want_node, truth
        assert _truth(src.replace(bug, fixed), backward_line, root_expr) is None  # the ablation: no overflow
        ref = io.StringIO()
        with contextlib.redirect_stdout(ref):
            exec(compile(src, str(tmp_path / name), "exec"), {"__name__": "__main__"})
        out = runs["test_a_float32_gradient_overflowing_in_a_listed_node_is_pinned"][name]
        assert out.stderr.replace("\r", "").startswith(ref.getvalue())
        doc = json.loads(out.stdout)
        assert validate_against_schema(doc)
        (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        nf = h["nonfinite"]
        assert (nf["step"], nf["node"], h["culprit"]["line"], nf["phase"]) == (truth[0], truth[1], truth[2], "backward")
        assert nf["value"] in ("inf", "-inf")
        if not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:
            continue  # the op inside the backward node, its inputs and the overflow's fix: from 2.11 (its rerun)
        assert nf["aten"].split(".")[1] in (want_op, f"{want_op}_backward"), nf
        assert "overflowed float32" in h["fix"]
        if want_node.startswith("NativeLayerNorm"):
            assert "ignore_index" in h["fix"] and any(abs(i["max"] - 316.2) < 0.1 for i in nf["inputs"])  # 1/sqrt(eps)


def test_a_float32_overflow_in_a_later_backward_is_pinned_by_the_loss_or_at_its_recurrence(tmp_path, runs):
    """NOTE [Gradients that may overflow]: a gradient that passes float32's range within one later backward, through
    many MulBackward0 each below the saved-value bound. With a loss past finfo.max ** 0.25 that backward is hooked at
    every node: pinned at the step it happened. With a loss that cancels to 0, it is pinned where it recurs, the
    backward after (the loop skips such steps), and the finding says where it was first seen. Truth from torch
    (hooks on every node, anomaly mode's forward traceback); ablation: the batches stay short."""
    for name, src, later in (("long_product.py", LONG_PRODUCT, 0), ("cancelled_skipped.py", CANCELLED_SKIPPED, 1)):
        truth = _truth(src, "    loss.backward()", "loss")
        assert truth is not None and truth[1] == "MulBackward0", truth
        assert _truth(src.replace("else 110", "else 30"), "    loss.backward()", "loss") is None
        ref = io.StringIO()
        with contextlib.redirect_stdout(ref):
            exec(compile(src, str(tmp_path / name), "exec"), {"__name__": "__main__"})
        out = runs["test_a_float32_overflow_in_a_later_backward_is_pinned_by_the_loss_or_at_its_recurrence"][name]
        assert out.stderr.replace("\r", "").startswith(ref.getvalue())
        doc = json.loads(out.stdout)
        assert validate_against_schema(doc)
        (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        nf = h["nonfinite"]
        assert (nf["node"], h["culprit"]["line"], nf["phase"]) == (truth[1], truth[2], "backward")
        assert nf["sink"]["what"] == "grad" and nf["sink"]["step"] == truth[0]
        assert nf["step"] == truth[0] + later and nf["value"] in ("inf", "-inf")
        assert (f"pinned at step {truth[0] + 1}; first seen at step {truth[0]}" in h["explanation"]) == bool(later)


class _FirstNonFinite(torch.utils._python_dispatch.TorchDispatchMode):
    """Truth with torch alone: the first op whose output holds a NaN or Inf while its inputs do not, and the line of
    the program that ran it."""

    def __init__(self, file):
        super().__init__()
        self.file, self.found = file, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        ins = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if self.found is None and isinstance(out, torch.Tensor) and out.is_floating_point() \
                and not torch.isfinite(out).all() and all(torch.isfinite(a).all() for a in ins):
            line = next(f.lineno for f in reversed(traceback.extract_stack()) if f.filename == self.file)
            self.found = (func.overloadpacket.__name__, line)
        return out


@pytest.mark.skipif(not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE, reason="the second call is made from torch 2.11")
def test_a_nan_made_in_a_function_whose_result_goes_unnamed_into_a_module_is_named_there(tmp_path, runs):
    """NOTE [A value a function returned, unnamed]: `lin(standardize(x))`, the NaN made by the sqrt of a cancelled
    variance inside the function, is named at that op and line (truth: torch's dispatch of the program's ops); the
    ablation (a two-pass variance) makes no NaN. A function with an effect of its own (a print) is not called again:
    the program's output is unchanged and the origin stays at the reading line."""
    path = tmp_path / "prog.py"
    truths = {}
    for label, src in (("pure", STANDARDIZE_UNNAMED), ("ablation", STANDARDIZE_UNNAMED.replace(
            "(x * x).mean(dim=0) - mean * mean", "x.var(dim=0, unbiased=False)")), ("forward", UNIT_ROWS_IN_FORWARD),
            ("forward_ablation", UNIT_ROWS_IN_FORWARD.replace("eps = 0.0", "eps = 1e-6"))):
        path.write_text(src)
        mode = _FirstNonFinite(str(path))
        with mode, contextlib.redirect_stdout(io.StringIO()):
            exec(compile(src, str(path), "exec"), {"__name__": "__main__"})
        truths[label] = mode.found
    assert truths["ablation"] is None and truths["forward_ablation"] is None
    out = runs["test_a_nan_made_in_a_function_whose_result_goes_unnamed_into_a_module_is_named_there"]
    for label in ("pure", "forward"):
        op, line = truths[label]
        doc = json.loads(out[label].stdout)
        assert validate_against_schema(doc)
        (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        assert (h["nonfinite"]["aten"].split(".")[1], h["culprit"]["line"], h["nonfinite"]["data"]) == (op, line, False)
        assert "returned (called at line" in h["explanation"]
    call_line = STANDARDIZE_UNNAMED.splitlines().index("out = lin(standardize(x))") + 1
    assert out["prints"].stderr.count("standardized") == 1  # the program's own print, once
    doc = json.loads(out["prints"].stdout)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    assert h["culprit"]["line"] == call_line + 1  # the print moved the lines down by one
    # a second call that drew random numbers would move the program's next draw (measured: it did, before the
    # generators' states were put back); python's own output is the truth
    draw = [ln for ln in out["draws_python"].stdout.splitlines() if ln.startswith("next draw")]
    assert len(draw) == 1 and out["draws"].stderr.replace("\r", "").count(draw[0]) == 1, out["draws"].stderr


def test_the_second_call_runs_only_functions_without_effects(tmp_path, monkeypatch):
    """NOTE [A value a function returned, unnamed]: a function is called a second time only when every call in it is
    an op of an op namespace or a method of its own values; torch's functions with effects are refused by name."""
    from tensorscope.instrument.origin_walk import _pure
    bodies = {
        "ok_ops": "return torch.log(F.softmax(x, -1)) + torch.nn.functional.relu(x) + math.sqrt(2) + torch.linalg.norm(x)",
        "ok_methods": "y = (x * x).mean(0)\n    return y.sqrt() / torch.norm(x)",
        "saves": "e = torch.save(x, 'x.pt')\n    return x.log()",
        "seeds": "e = torch.manual_seed(0)\n    return x.log()",
        "collective": "e = torch.distributed.all_reduce(x)\n    return x.log()",
        "dtype": "e = torch.set_default_dtype(torch.float64)\n    return x.log()",
        "retains": "e = x.retain_grad()\n    return x.log()",
        "private_print": "e = torch._C._VariableFunctions._print('x')\n    return x.log()",
        "lowrank": "u, s, v = torch.svd_lowrank(x)\n    return s.log()",
        "module_call": "return self_fc(x)",
    }
    src = "import math\nimport torch\nimport torch.nn.functional as F\n\n" + "".join(
        f"def {name}(x):\n    {body}\n\n\n" for name, body in bodies.items())
    (tmp_path / "effects_mod.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    import effects_mod
    got = {name: _pure(getattr(effects_mod, name)) for name in bodies}
    assert got == {name: name.startswith("ok_") for name in bodies}, got


CUDA_TIED = """\
import torch

emb = torch.full((4, 8), 0.25, dtype=torch.float16, device="cuda", requires_grad=True)
tokens = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3], device="cuda")
x = emb[tokens]
logits = x @ emb.t()
loss = logits.float().pow(2).mean()
scale = 2.0 ** 19
(loss * scale).backward()
print("grad max", emb.grad.float().abs().max().item())
"""


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gradient_sum_that_overflows_on_cuda_is_named(tmp_path, schema):
    """NOTE [Sums checked on a GPU]: the tied float16 embeddings on CUDA. Truth from torch on the GPU: each use's
    gradient is finite, their float16 sum is not. The sums' hooks queue their flags on the device and the gradient
    sink reads them only when its own check fails: explain names the engine's sum, both uses' lines and their
    statistics, and the program prints what it prints under python."""
    emb = torch.full((4, 8), 0.25, dtype=torch.float16, device="cuda", requires_grad=True)
    tokens = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3], device="cuda")
    x, t = emb[tokens], emb.t()
    gx, gt = torch.autograd.grad((x @ t).float().pow(2).mean() * 2.0 ** 19, [x, t])
    by_lookup = torch.zeros_like(emb).index_put_((tokens,), gx, accumulate=True)
    by_head = gt.t()
    assert torch.isfinite(by_lookup).all() and torch.isfinite(by_head).all()
    assert torch.isinf(by_lookup + by_head).all()
    prog = tmp_path / "cuda_tied.py"
    prog.write_text(CUDA_TIED)
    env = dict(os.environ, PYTHONPATH=str(REPO), TENSORSCOPE_NO_PROGRESS="1")
    ref = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    out = subprocess.run([sys.executable, "-m", "tensorscope", "explain", "--json", str(prog)], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=300)
    assert out.stderr.replace("\r", "").startswith(ref.stdout), out.stderr
    doc = json.loads(out.stdout)
    assert validate_against_schema(doc)
    (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
    nf = h["nonfinite"]
    assert (nf["aten"], nf["phase"], nf["value"], h["culprit"]["line"], h["backward"]["line"]) == \
        ("aten.add", "backward", "inf", 5, 9)
    assert [u["line"] for u in nf["summed"]] == [5, 6]
    assert sorted(i["max"] for i in nf["inputs"]) == sorted([by_lookup.max().item(), by_head.max().item()])


def test_fixes_fitted_to_ops_whose_node_names_hold_digits_and_to_tiny_denominators():
    """The fix names the forward op of a node whose name holds a digit (torch's own node names: `Log1PBackward0`,
    `Atan2Backward0`), says a `log1p` whose result an index kept from is the index's doing, a `pow` of a negative
    base with a fractional exponent, and a division's gradient against a denominator torch made tiny, not 0."""
    from tensorscope.kinds.non_finite_value import base_op, fix_for
    a = torch.tensor([-1.0, 0.5], requires_grad=True)
    assert base_op({"node": torch.log1p(a).grad_fn.name()}) == "log1p"
    assert base_op({"node": torch.atan2(a, a).grad_fn.name()}) == "atan2"
    assert base_op({"node": torch.log10(a.abs()).grad_fn.name()}) == "log10"
    code = "l = torch.log1p(a)[keep].sum()"
    fix = fix_for({"node": "Log1PBackward0", "phase": "backward", "line": 8, "value": "nan", "inputs": []}, code)
    assert "torch.log1p(x[keep])" in fix, fix
    v = torch.tensor([1.6, -0.6, 1.2])
    assert torch.isnan(torch.pow(v, 1.0 / 3.0)).any()
    s = {"negatives": int((v < 0).sum()), "zeros": 0, "min": v.min().item(), "max": v.max().item()}
    fix = fix_for({"op": "aten.pow", "phase": "forward", "line": 10, "value": "nan", "inputs": [s]}, "root = v ** (1 / 3)")
    assert "x.sign() * x.abs().pow(e)" in fix, fix
    z = torch.tensor([-96.0, -112.0, -121.0])
    e = torch.exp(z)
    den = e.sum()
    assert 0 < den.item() < 1e-38 and torch.isinf(1.0 / den ** 2)  # the division's gradient for the denominator
    s = {"negatives": 0, "zeros": 0, "min": den.item(), "max": den.item(), "dtype": "float32"}
    fix = fix_for({"node": "DivBackward0", "op": "DivBackward0", "phase": "backward", "line": 12, "value": "-inf",
                   "dtype": "float32", "inputs": [s]}, "p = e / e.sum()")
    assert "tiny" in fix and f"{den.item():.3g}" in fix and "division by 0" not in fix, fix


def test_fixes_fitted_to_the_nodes_and_ops_of_the_unseen_programs():
    """Torch's own node names and values (measured here) lead to the fix of their cause: the gradient through
    `eigh`'s vectors at repeated eigenvalues, `logdet` of a negative determinant, `ctc_loss` over an input too
    short for its target, `rsqrt` of 0 in forward. In-process: no CLI run."""
    from tensorscope.kinds.non_finite_value import fix_for
    a = torch.eye(3, requires_grad=True)
    vals, vecs = torch.linalg.eigh(a * 2.0)
    vecs[:, -1].sum().backward()
    assert torch.isnan(a.grad).any() and vals[0] == vals[1]
    fix = fix_for({"node": vecs.grad_fn.name(), "phase": "backward", "line": 8, "value": "nan", "inputs": []}, "")
    assert "eigvalsh" in fix and "distinct" in fix, fix
    assert torch.isnan(torch.logdet(torch.tensor([[1.0, 2.0], [3.0, 1.0]])))
    fix = fix_for({"op": "aten.logdet", "phase": "forward", "line": 9, "value": None, "inputs": []}, "")
    assert "slogdet" in fix, fix
    lp = torch.zeros(2, 1, 3).log_softmax(2)
    assert torch.isinf(torch.nn.functional.ctc_loss(lp, torch.tensor([[1, 1]]), torch.tensor([2]), torch.tensor([2])))
    fix = fix_for({"op": "aten.ctc_loss", "phase": "forward", "line": 15, "value": "inf", "inputs": []}, "")
    assert "zero_infinity=True" in fix, fix
    assert torch.isinf(torch.rsqrt(torch.zeros(1)))
    fix = fix_for({"op": "aten.rsqrt", "phase": "forward", "line": 13, "value": "inf", "inputs": []}, "")
    assert "eps" in fix and "rsqrt" in fix and "gradient" not in fix, fix
