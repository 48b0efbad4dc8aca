"""The clone, out-of-place and no_grad fixes of the kinds, run (NOTE [A write meant to reach its base]).

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
    # the source and the destination of a copy overlap: the copy must read the values before the write
    "overlapping_source": dict(
        kind="overlapping-write",
        bug="""
            a = torch.arange(6.0)
            a[1:].copy_(a[:-1])
            print(a.tolist())
        """,
        fragment="`a[1:].copy_(a[:-1].clone())`",
        absent=("a[1:] = a[1:].clone()",),
        fixed=["""
            a = torch.arange(6.0)
            a[1:].copy_(a[:-1].clone())
            print(a.tolist())
        """],
        reference="""
            a = torch.arange(6.0)
            a = torch.cat([a[:1], a[:-1]])
            print(a.tolist())
        """),
    # a write into an expanded tensor: each row its own memory, then doubled
    "overlapping_expand": dict(
        kind="overlapping-write",
        bug="""
            x = torch.randn(4, requires_grad=True)
            e = (x * 1.0)[None].expand(3, 4)
            e.mul_(2.0)
            loss = (e * e).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`e = (x * 1.0)[None].expand(3, 4).clone()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            e = (x * 1.0)[None].expand(3, 4).clone()
            e.mul_(2.0)
            loss = (e * e).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            x = torch.randn(4, requires_grad=True)
            e = x[None].repeat(3, 1) * 2.0
            loss = (e * e).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """),
    # features made under inference_mode, then used with autograd
    "inference_tensor": dict(
        kind="inference-tensor-saved",
        bug="""
            lin = torch.nn.Linear(4, 2)
            with torch.inference_mode():
                feats = torch.randn(3, 4) * 2
            loss = lin(feats).pow(2).sum()
            loss.backward()
            print(round(loss.item(), 4), round(lin.weight.grad.sum().item(), 4))
        """,
        fragment="with `torch.no_grad()`",
        absent=(),
        fixed=["""
            lin = torch.nn.Linear(4, 2)
            with torch.no_grad():
                feats = torch.randn(3, 4) * 2
            loss = lin(feats).pow(2).sum()
            loss.backward()
            print(round(loss.item(), 4), round(lin.weight.grad.sum().item(), 4))
        """],
        reference="""
            lin = torch.nn.Linear(4, 2)
            feats = torch.randn(3, 4) * 2
            loss = lin(feats).pow(2).sum()
            loss.backward()
            print(round(loss.item(), 4), round(lin.weight.grad.sum().item(), 4))
        """),
    # initialising one entry of a leaf that requires grad
    "leaf_init": dict(
        kind="leaf-inplace",
        bug="""
            w = torch.randn(3, requires_grad=True)
            w[0] = 0.0
            loss = (w * w).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in w.grad.tolist()])
        """,
        fragment="`with torch.no_grad(): w[0] = 0.0`",
        absent=(),
        fixed=["""
            w = torch.randn(3, requires_grad=True)
            with torch.no_grad(): w[0] = 0.0
            loss = (w * w).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in w.grad.tolist()])
        """],
        reference="""
            w = torch.randn(3)
            w[0] = 0.0
            w.requires_grad_()
            loss = (w * w).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in w.grad.tolist()])
        """),
    # a tensor kept on ctx as an attribute, changed before backward (a hazard: the gradient is silently wrong)
    "ctx_attribute": dict(
        kind="ctx-attribute-changed",
        bug="""
            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, s):
                    ctx.s = s
                    return x * s

                @staticmethod
                def backward(ctx, g):
                    return g * ctx.s, None


            x = torch.ones(3, requires_grad=True)
            s = torch.full((3,), 2.0)
            y = Scale.apply(x, s)
            s.mul_(10.0)
            y.sum().backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`ctx.s = s.detach().clone()`",
        absent=(),
        fixed=["""
            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, s):
                    ctx.s = s.detach().clone()
                    return x * s

                @staticmethod
                def backward(ctx, g):
                    return g * ctx.s, None


            x = torch.ones(3, requires_grad=True)
            s = torch.full((3,), 2.0)
            y = Scale.apply(x, s)
            s.mul_(10.0)
            y.sum().backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            x = torch.ones(3, requires_grad=True)
            (x * torch.full((3,), 2.0)).sum().backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """),
}


def _numbers(line: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", line)]


def _write(path, body):
    path.write_text(HEAD + textwrap.dedent(body))
    return str(path)


def test_fixes_run_clean_and_keep_the_intent(tmp_path):
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
        kind = case.get("kind", "view-inplace")
        d = next((f for f in [doc["diagnosis"]] + doc["hazards"] if f and f["kind"] == kind), None)
        assert d is not None, (name, doc["diagnosis"], doc["hazards"])
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
