"""The clone and out-of-place fixes of view-inplace, run (NOTE [A write meant to reach its base]).

For each case: a program that fails; the fragment tensorscope's fix for it must contain; the program
rewritten by hand the way that fragment says; and a reference written with plain torch that computes
what the failing program meant (out of place, no view written). The rewritten program must run clean
under `tensorscope explain` and print exactly what the reference prints under python: the fix keeps
the program's intent. Where the base of the view is read after the write, a clone or an out-of-place
op would drop the write (the printed loss would differ), so the fix must not offer them. All runs are
forks of one process (tests/_forked.py).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from _cli import run_many

pytest.importorskip("torch")

HEAD = "import torch\n\ntorch.manual_seed(0)\n"

CASES = {
    # a slice taken under no_grad, written with grad on; the base `h` is summed afterwards
    "no_grad_view_base_read": dict(
        bug="""
            x = torch.randn(6, requires_grad=True)
            h = x * 2
            with torch.no_grad():
                head = h[:3]
            head.add_(1.0)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="move `head = h[:3]` out of the no_grad block",
        absent=("head.clone()", "head.add(1.0)"),
        # the advice it used to give (clone the view, then write): runs clean, but `h` keeps its old values
        dropped="""
            x = torch.randn(6, requires_grad=True)
            h = x * 2
            with torch.no_grad():
                head = h[:3]
            head = head.clone()
            head.add_(1.0)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fixed=["""
            x = torch.randn(6, requires_grad=True)
            h = x * 2
            head = h[:3]
            head.add_(1.0)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            x = torch.randn(6, requires_grad=True)
            h = x * 2 + torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """),
    # scaling the query after unbind(); the packed qkv is not read again
    "unbind_qkv": dict(
        bug="""
            proj = torch.nn.Linear(8, 24)
            x = torch.randn(2, 5, 8)
            qkv = proj(x).reshape(2, 5, 3, 8).permute(2, 0, 1, 3)
            q, k, v = qkv.unbind(0)
            q.mul_(8 ** -0.5)
            out = (torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v).sum()
            out.backward()
            print(round(out.item(), 4), round(proj.weight.grad.abs().sum().item(), 4))
        """,
        fragment="`q = q.mul(8 ** (-0.5))`",
        absent=(),
        fixed=["""
            proj = torch.nn.Linear(8, 24)
            x = torch.randn(2, 5, 8)
            qkv = proj(x).reshape(2, 5, 3, 8).permute(2, 0, 1, 3)
            q, k, v = qkv.unbind(0)
            q = q.mul(8 ** (-0.5))
            out = (torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v).sum()
            out.backward()
            print(round(out.item(), 4), round(proj.weight.grad.abs().sum().item(), 4))
        """, """
            proj = torch.nn.Linear(8, 24)
            x = torch.randn(2, 5, 8)
            qkv = proj(x).reshape(2, 5, 3, 8).permute(2, 0, 1, 3)
            q, k, v = qkv.unbind(0)
            q = q.clone()
            q.mul_(8 ** -0.5)
            out = (torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v).sum()
            out.backward()
            print(round(out.item(), 4), round(proj.weight.grad.abs().sum().item(), 4))
        """],
        reference="""
            proj = torch.nn.Linear(8, 24)
            x = torch.randn(2, 5, 8)
            qkv = proj(x).reshape(2, 5, 3, 8).permute(2, 0, 1, 3)
            scores = (qkv[0] @ qkv[1].transpose(-2, -1)) * 8 ** -0.5
            out = (torch.softmax(scores, dim=-1) @ qkv[2]).sum()
            out.backward()
            print(round(out.item(), 4), round(proj.weight.grad.abs().sum().item(), 4))
        """,
        fragment2="`q = q.clone()`"),
    # an unbind output written, and its base read after the write: the write must reach the base
    "unbind_base_read": dict(
        bug="""
            x = torch.randn(3, 4, requires_grad=True)
            h = x * 1.5
            a, b, c = h.unbind(0)
            a.mul_(2.0)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.sum(1).tolist()])
        """,
        fragment="`h[0].mul_(2.0)`",
        absent=("a.clone()", "a.mul(2.0)"),
        fixed=["""
            x = torch.randn(3, 4, requires_grad=True)
            h = x * 1.5
            a, b, c = h.unbind(0)
            h[0].mul_(2.0)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.sum(1).tolist()])
        """],
        reference="""
            x = torch.randn(3, 4, requires_grad=True)
            h = x * 1.5 * torch.tensor([2.0, 1.0, 1.0])[:, None]
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.sum(1).tolist()])
        """),
    # a custom Function whose forward returns a view of its input, written in place by the caller
    "custom_function_view": dict(
        bug="""
            class Flatten(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.shape = x.shape
                    return x.view(-1)

                @staticmethod
                def backward(ctx, grad):
                    return grad.view(ctx.shape)


            x = torch.randn(2, 3, requires_grad=True)
            flat = Flatten.apply(x * 1.0)
            flat.mul_(2.0)
            loss = (flat * flat).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.flatten().tolist()])
        """,
        fragment="`flat = flat.clone()`",
        absent=(),
        fixed=["""
            class Flatten(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.shape = x.shape
                    return x.view(-1)

                @staticmethod
                def backward(ctx, grad):
                    return grad.view(ctx.shape)


            x = torch.randn(2, 3, requires_grad=True)
            flat = Flatten.apply(x * 1.0)
            flat = flat.clone()
            flat.mul_(2.0)
            loss = (flat * flat).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.flatten().tolist()])
        """],
        reference="""
            x = torch.randn(2, 3, requires_grad=True)
            flat = x.reshape(-1) * 2.0
            loss = (flat * flat).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.flatten().tolist()])
        """),
    # detach_() of a view: the view is meant to carry no gradient, its base still does
    "detach_view": dict(
        bug="""
            x = torch.randn(4, requires_grad=True)
            h = x * 2
            v = h[:2]
            v.detach_()
            out = (v * 3).sum() + (h * h).sum()
            out.backward()
            print(round(out.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`v = v.detach()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            h = x * 2
            v = h[:2]
            v = v.detach()
            out = (v * 3).sum() + (h * h).sum()
            out.backward()
            print(round(out.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            x = torch.randn(4, requires_grad=True)
            h = x * 2
            out = (h.detach()[:2] * 3).sum() + (h * h).sum()
            out.backward()
            print(round(out.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """),
}


def _numbers(line: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", line)]


def _write(path, body):
    path.write_text(HEAD + textwrap.dedent(body))
    return str(path)


def test_view_fixes_run_clean_and_keep_the_intent(tmp_path):
    jobs, plan = [], []
    for name, case in CASES.items():
        bug = _write(tmp_path / f"{name}.py", case["bug"])
        ref = _write(tmp_path / f"{name}_reference.py", case["reference"])
        fixed = [_write(tmp_path / f"{name}_fixed{i}.py", body) for i, body in enumerate(case["fixed"])]
        plan.append((name, len(jobs), len(fixed)))
        jobs += [("tensorscope", "explain", "--json", bug), ("python", ref)]
        jobs += [("tensorscope", "explain", "--json", f) for f in fixed]
    dropped = [(name, len(jobs) + i) for i, name in enumerate(n for n in CASES if "dropped" in CASES[n])]
    jobs += [("python", _write(tmp_path / f"{name}_dropped.py", CASES[name]["dropped"])) for name, _ in dropped]
    results = run_many(jobs)
    for name, at in dropped:  # the test can tell a fix that drops the write
        rc, out, _ = results[at]
        ref = next(results[a + 1][1] for n, a, _ in plan if n == name)
        assert rc == 0 and _numbers(out) != pytest.approx(_numbers(ref), rel=1e-4, abs=1e-4), (name, out, ref)
    for name, at, n in plan:
        case = CASES[name]
        _, _, err, doc = results[at]
        assert doc is not None, (name, err[-2000:])
        d = doc["diagnosis"]
        assert d and d["kind"] == "view-inplace", (name, d)
        assert case["fragment"] in d["fix"] and case.get("fragment2", case["fragment"]) in d["fix"], (name, d["fix"])
        assert not any(a in d["fix"] for a in case["absent"]), (name, d["fix"])
        rc, want, ref_err = results[at + 1]
        assert rc == 0 and want.strip(), (name, ref_err[-2000:])
        for i in range(n):
            _, _, err, doc = results[at + 2 + i]
            assert doc is not None, (name, i, err[-2000:])
            assert doc["program"]["exit_status"] == 0, (name, i, err[-2000:])
            assert doc["diagnosis"] is None and not doc["hazards"], (name, i, doc["diagnosis"], doc["hazards"])
            # --json: the program's stdout goes to stderr, before tensorscope's own lines; values as the
            # reference's up to float rounding (the reference computes them in another order)
            got = _numbers(err.replace("\r", "").splitlines()[0])
            assert got == pytest.approx(_numbers(want), rel=1e-4, abs=1e-4), (name, i, want, err[:500])
