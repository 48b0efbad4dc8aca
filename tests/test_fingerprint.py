"""Silent writes by any path: saved bytes checked at backward (NOTE [Fingerprints of saved tensors]).

One program holds four silent writes that no wrapper sees or that bump no version (NumPy through
shared memory, a custom Function writing its input through a pointer, BatchNorm running statistics,
`.data`); each prints the gradient it got, and the test recomputes the right one with torch to
prove the gradient is wrong where the hazard is reported. A fine program with gradcheck and
gradgradcheck (perturb and restore) gives no hazard. `run` registers no hooks unless
`--check-values` is given.
"""

from __future__ import annotations

import json
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from _cli import line_of, load_report, run_cli, run_many, run_python, validate_against_schema

SILENT = """
    import ctypes
    import torch

    from tensorscope import compat

    def hooks():
        return compat.top_pack_hook() is not None

    print("hooks", hooks())
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = torch.tensor([0.5, 1.5, 2.5])
    arr = x.numpy()                    # shares x's memory
    y = (w * x).sum()                  # mul saves x
    arr *= 10.0                        # a NumPy write: no version bump
    y.backward()
    print("numpy", w.grad.tolist())

    class Zero(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctypes.memset(t.data_ptr(), 0, t.numel() * t.element_size())  # no ctx.mark_dirty
            return t * 1

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    e = a.exp()
    (Zero.apply(e).sum() + e.sum()).backward()
    print("function", a.grad.tolist())

    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3)
    bn.running_mean.fill_(0.5)
    xb = torch.randn(8, 3, requires_grad=True)
    bn.eval()
    out = bn(xb)                       # eval mode saves running_var
    bn.train()
    bn(torch.randn(8, 3) * 5 + 2)      # the kernel updates the running stats, no version bump
    out.pow(2).sum().backward()
    print("batchnorm", xb.grad.tolist())

    d = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ed = d.exp()
    ed.data.zero_()
    ed.sum().backward()
    print("data", d.grad.tolist())
"""

FINE = """
    import torch
    x = torch.rand(3, dtype=torch.double, requires_grad=True)
    print(torch.autograd.gradcheck(lambda t: t.exp() * t, (x,)))
    print(torch.autograd.gradgradcheck(lambda t: t.exp() * t, (x,)))
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        loss = m(torch.randn(16, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("ok")
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fingerprint")
    silent, fine = tmp / "silent.py", tmp / "fine.py"
    silent.write_text(textwrap.dedent(SILENT))
    fine.write_text(textwrap.dedent(FINE))
    with ThreadPoolExecutor(2) as pool:
        jobs = {
            "explain": pool.submit(run_cli, "explain", "--json", str(silent), cwd=tmp),
            "fine": pool.submit(run_cli, "explain", "--json", str(fine), cwd=tmp),
            "checked": pool.submit(run_cli, "run", "--check-values", "-o", str(tmp / "c.json"), str(silent), cwd=tmp),
            "run": pool.submit(run_cli, "run", "-o", str(tmp / "r.json"), str(silent), cwd=tmp),
            "python": pool.submit(run_python, silent, cwd=tmp),
        }
        out = {k: v.result() for k, v in jobs.items()}
    out["checked_doc"] = load_report((tmp / "c.json").read_text())
    out["run_doc"] = load_report((tmp / "r.json").read_text())
    out["path"] = silent
    return out


def _printed(text: str) -> dict:
    got = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        got[name] = value
    return got


def _true_gradients() -> dict:
    """The gradients the program would get without the silent writes, computed with torch."""
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (w * torch.tensor([0.5, 1.5, 2.5])).sum().backward()
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    e = a.exp()
    (e * 1 + e).sum().backward()  # Zero passes the gradient through; exp's saved output unchanged
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3)
    bn.running_mean.fill_(0.5)
    xb = torch.randn(8, 3, requires_grad=True)
    bn.eval()
    bn(xb).pow(2).sum().backward()
    d = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d.exp().sum().backward()
    return {"numpy": w.grad, "function": a.grad, "batchnorm": xb.grad, "data": d.grad}


def test_every_silent_write_found_and_named(runs):
    rc, _, err, doc = runs["explain"]
    assert rc == 1 and validate_against_schema(doc) is not False
    path = runs["path"]
    printed = _printed(err)  # --json sends the program's stdout to stderr
    truth = _true_gradients()
    for name, grad in truth.items():  # the gradients really are wrong
        assert not torch.allclose(torch.tensor(json.loads(printed[name])), grad), name
    hazards = doc["hazards"]
    assert {h["kind"] for h in hazards} == {"silent-saved-tensor-write"}
    by_tensor = {tuple(h["tensor"]["names"]): h for h in hazards}
    numpy = by_tensor[("x",)]
    # the writing line, found by watching the exposed bytes (NOTE [Watching exposed saved bytes]);
    # the line that shared the memory stays in the explanation
    assert numpy["culprit"]["line"] == line_of(path, "arr *= 10.0")
    assert f"line {line_of(path, 'arr = x.numpy()')}" in numpy["explanation"]
    assert numpy["saved_by"]["line"] == line_of(path, "y = (w * x).sum()")
    assert numpy["backward"]["line"] == line_of(path, "y.backward()")
    function = by_tensor[("e",)]
    assert function["culprit"]["line"] == line_of(path, "def forward(ctx, t):")
    assert "mark_dirty" in function["fix"]
    running = [h for names, h in by_tensor.items() if "bn.running_var" in names]
    assert running and running[0]["culprit"]["line"] == line_of(path, "bn(torch.randn(8, 3) * 5 + 2)")
    assert running[0]["saved_by"]["line"] == line_of(path, "out = bn(xb)")
    assert "between line" in running[0]["explanation"]
    data = by_tensor[("ed",)]
    assert data["culprit"]["line"] == line_of(path, "ed.data.zero_()")


def test_gradcheck_and_a_fine_program_give_no_hazard(runs):
    rc, _, err, doc = runs["fine"]
    assert "True\nTrue\nok" in err
    assert rc == 0 and doc["hazards"] == [] and doc["diagnosis"] is None


def test_run_checks_values_only_when_asked(runs):
    py = runs["python"]
    assert py[0] == 0 and "hooks False" in py[1]
    rc, out, err, _ = runs["run"]
    assert (rc, out, err) == py  # no hooks registered: byte-identical to python
    assert runs["run_doc"]["hazards"] == []
    rc, out, err, _ = runs["checked"]
    assert rc == 0 and "hooks True" in out
    names = {tuple(h["tensor"]["names"]) for h in runs["checked_doc"]["hazards"]}
    assert {("x",), ("e",), ("ed",)} <= names


LSTM_TWICE = """import torch

torch.manual_seed(0)
lstm = torch.nn.LSTM(8, 16)
x = torch.randn(5, 4, 8)
w = torch.randn(5, 4, 16)
arr = w.numpy()
out, _ = lstm(x)
loss = (out * w).sum()
g1 = torch.autograd.grad(loss, list(lstm.parameters()), retain_graph=True)
pass  # WRITE
g2 = torch.autograd.grad(loss, list(lstm.parameters()), retain_graph=True)
print(all(torch.equal(a, b) for a, b in zip(g1, g2)))
"""


def test_a_workspace_its_own_backward_rewrites_is_no_silent_write(tmp_path):
    """NOTE [A saved tensor its backward writes]: two backward calls through one LSTM graph kept with
    retain_graph=True. torch: the gradients are equal bit for bit (the printed True), though the second
    unpack finds oneDNN's workspace rewritten by the first backward (main reported a silent write with no
    culprit); a NumPy write into the saved `w` between the two calls (the printed False: the gradients
    differ) is still found at its line."""
    fine, wrote = tmp_path / "lstm_twice.py", tmp_path / "lstm_twice_write.py"
    fine.write_text(LSTM_TWICE)
    wrote.write_text(LSTM_TWICE.replace("pass  # WRITE", "arr[0] = 2.0  # WRITE"))
    (frc, fout, _), (wrc, wout, _), (rc, _, ferr, fdoc), (_, _, werr, wdoc) = run_many(
        [("python", str(fine)), ("python", str(wrote)), ("tensorscope", "explain", "--json", str(fine)),
         ("tensorscope", "explain", "--json", str(wrote))])
    assert (frc, fout, wrc, wout) == (0, "True\n", 0, "False\n")
    assert fdoc is not None and wdoc is not None, (ferr + werr)[-2000:]
    assert fdoc["hazards"] == [] and fdoc["diagnosis"] is None, fdoc["hazards"]
    found = [(h["kind"], h["culprit"]["line"] if h["culprit"] else None, h["tensor"]["names"]) for h in wdoc["hazards"]]
    assert found == [("silent-saved-tensor-write", line_of(wrote, "arr[0] = 2.0"), ["w"])], found
