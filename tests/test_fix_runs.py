"""Each kind's fix text, run (NOTE [A write meant to reach its base] for the clone and out-of-place fixes).

For each case: a program that fails; the fragment tensorscope's fix for it must contain; the program
rewritten by hand the way that fragment says; and a reference written with plain torch that computes
what the failing program meant (out of place, no view written). The rewritten program must run clean
under `tensorscope explain` and print exactly what the reference prints under python: the fix keeps
the program's intent. Where the base of the view is read after the write, a clone or an out-of-place
op would drop the write (the printed loss would differ), so the fix must not offer them. All runs are
forks of one process (tests/_forked.py). Where a fix text was wrong, the program its old text gave is
run too: `dropped` (plain python) prints other values than the reference, `unfixed` (under `explain`)
still has the finding.
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
    # --- every other kind whose fix is a code rewrite: the failing program, the fix as its text says ---
    # a saved output written in place: out of place, or a clone (the graph keeps the value it saved)
    "saved_output_written": dict(
        kind="inplace-modified-saved-tensor",
        bug="""
            x = torch.randn(4, requires_grad=True)
            y = x.sigmoid()
            y.mul_(2.0)
            loss = (y * y).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`y = y.mul(2.0)`",
        fragment2="`y = y.clone()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            y = x.sigmoid()
            y = y.mul(2.0)
            loss = (y * y).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """, """
            x = torch.randn(4, requires_grad=True)
            y = x.sigmoid()
            y = y.clone()
            y.mul_(2.0)
            loss = (y * y).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            s = torch.sigmoid(torch.randn(4))
            print(round((4 * s * s).sum().item(), 4), [round(g, 4) for g in (8 * s * s * (1 - s)).tolist()])
        """),
    # two losses over one graph, backward on each
    "two_losses": dict(
        kind="backward-twice",
        bug="""
            x = torch.randn(4, requires_grad=True)
            h = x.exp()
            loss_a = h.sum()
            loss_b = (h * h).sum()
            loss_a.backward()
            loss_b.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`(loss_a + loss_b).backward()`",
        fragment2="pass retain_graph=True to the first backward",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            h = x.exp()
            loss_a = h.sum()
            loss_b = (h * h).sum()
            (loss_a + loss_b).backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """, """
            x = torch.randn(4, requires_grad=True)
            h = x.exp()
            loss_a = h.sum()
            loss_b = (h * h).sum()
            loss_a.backward(retain_graph=True)
            loss_b.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            e = torch.randn(4).exp()
            print([round(g, 4) for g in (e + 2 * e * e).tolist()])
        """),
    "non_scalar": dict(
        kind="non-scalar-backward",
        bug="""
            x = torch.randn(4, requires_grad=True)
            y = x * x
            y.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`y.sum().backward()`",
        fragment2="`y.backward(gradient=torch.ones_like(y))`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            y = x * x
            y.sum().backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """],  # the other, `y.backward(torch.ones_like(y))`, runs in "gradient_shape"
        reference="""
            print([round(g, 4) for g in (2 * torch.randn(4)).tolist()])
        """),
    "gradient_shape": dict(
        kind="gradient-shape-mismatch",
        bug="""
            x = torch.randn(4, requires_grad=True)
            y = x * x
            y.backward(torch.ones(1))
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`y.backward(torch.ones_like(y))`",
        fragment2="`y.sum().backward()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            y = x * x
            y.backward(torch.ones_like(y))
            print([round(g, 4) for g in x.grad.tolist()])
        """],  # the other, `y.sum().backward()`, runs in "non_scalar"
        reference="""
            print([round(g, 4) for g in (2 * torch.randn(4)).tolist()])
        """),
    "integer_leaf": dict(
        kind="non-float-requires-grad",
        bug="""
            w = torch.tensor([1, 2, 3], requires_grad=True)
            loss = (w * w).sum()
            loss.backward()
            print(w.grad.tolist())
        """,
        fragment="`torch.tensor([1.0, 2.0, 3.0], requires_grad=True)`",
        absent=(),
        fixed=["""
            w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
            loss = (w * w).sum()
            loss.backward()
            print(w.grad.tolist())
        """],
        reference="""
            print([2.0 * v for v in (1, 2, 3)])
        """),
    "numpy_of_a_graph_tensor": dict(
        kind="numpy-requires-grad",
        bug="""
            x = torch.randn(4, requires_grad=True)
            y = x * 3
            arr = y.numpy()
            print([round(float(v), 4) for v in arr])
        """,
        fragment="`y.detach().numpy()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            y = x * 3
            arr = y.detach().numpy()
            print([round(float(v), 4) for v in arr])
        """],
        reference="""
            print([round(v, 4) for v in (torch.randn(4) * 3).tolist()])
        """),
    # growing a leaf that requires grad: the old values kept, the new rows zero, still a leaf
    "resize_leaf": dict(
        kind="resize-requires-grad",
        bug="""
            x = torch.randn(4, requires_grad=True)
            x.resize_(6)
            (x * x).sum().backward()
            print(list(x.shape), [round(v, 4) for v in x.detach().tolist()], int(x.is_leaf), x.grad.shape[0])
        """,
        fragment="`new = x.detach().new_zeros(6); new[:x.shape[0]] = x.detach(); x = new.requires_grad_()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            new = x.detach().new_zeros(6); new[:x.shape[0]] = x.detach(); x = new.requires_grad_()
            (x * x).sum().backward()
            print(list(x.shape), [round(v, 4) for v in x.detach().tolist()], int(x.is_leaf), x.grad.shape[0])
        """],
        reference="""
            x = torch.cat([torch.randn(4), torch.zeros(2)])
            print([6], [round(v, 4) for v in x.tolist()], 1, 6)
        """),
    # turning requires_grad off on an intermediate: meant as a constant in the loss
    "requires_grad_off": dict(
        kind="non-leaf-requires-grad",
        bug="""
            x = torch.randn(4, requires_grad=True)
            h = x * 2
            h.requires_grad = False
            loss = (h * x).sum()
            loss.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="`h = h.detach()`",
        absent=(),
        fixed=["""
            x = torch.randn(4, requires_grad=True)
            h = x * 2
            h = h.detach()
            loss = (h * x).sum()
            loss.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            print([round(g, 4) for g in (2 * torch.randn(4)).tolist()])
        """),
    "unused_grad_input": dict(
        kind="unused-input",
        bug="""
            x = torch.randn(3, requires_grad=True)
            z = torch.randn(3, requires_grad=True)
            out = (x * x).sum()
            gx, gz = torch.autograd.grad(out, [x, z])
            print([round(g, 4) for g in gx.tolist()], gz.tolist())
        """,
        fragment="`torch.autograd.grad(out, [x, z], allow_unused=True, materialize_grads=True)`",
        absent=(),
        fixed=["""
            x = torch.randn(3, requires_grad=True)
            z = torch.randn(3, requires_grad=True)
            out = (x * x).sum()
            gx, gz = torch.autograd.grad(out, [x, z], allow_unused=True, materialize_grads=True)
            print([round(g, 4) for g in gx.tolist()], gz.tolist())
        """],
        reference="""
            x = torch.randn(3)
            print([round(g, 4) for g in (2 * x).tolist()], [0.0, 0.0, 0.0])
        """),
    # a scaled leaf is no leaf: its .grad stays None
    "scaled_leaf": dict(
        kind="non-leaf-grad-none",
        bug="""
            w = torch.randn(3, requires_grad=True) * 0.1
            loss = (w * w).sum()
            loss.backward()
            print([round(g, 4) for g in w.grad.tolist()])
        """,
        fragment="`w = (torch.randn(3, requires_grad=True) * 0.1).detach().requires_grad_()`",
        fragment2="`w.retain_grad()` before backward()",
        absent=(),
        fixed=["""
            w = (torch.randn(3, requires_grad=True) * 0.1).detach().requires_grad_()
            loss = (w * w).sum()
            loss.backward()
            print([round(g, 4) for g in w.grad.tolist()])
        """, """
            w = torch.randn(3, requires_grad=True) * 0.1
            loss = (w * w).sum()
            w.retain_grad()
            loss.backward()
            print([round(g, 4) for g in w.grad.tolist()])
        """],
        reference="""
            print([round(g, 4) for g in (2 * torch.randn(3) * 0.1).tolist()])
        """),
    "item_loss": dict(
        kind="float-has-no-backward",
        bug="""
            x = torch.randn(3, requires_grad=True)
            loss = (x * x).sum().item()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="remove `.item()` where it is made",
        absent=(),
        fixed=["""
            x = torch.randn(3, requires_grad=True)
            loss = (x * x).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            x = torch.randn(3)
            print(round(float((x * x).sum()), 4), [round(g, 4) for g in (2 * x).tolist()])
        """),
    "leaky_relu_negative_slope": dict(
        kind="inplace-backward-unsupported",
        bug="""
            import torch.nn.functional as F
            x = torch.randn(5, requires_grad=True)
            h = x * 2
            F.leaky_relu_(h, -0.1)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="replace the line with `h = F.leaky_relu(h, -0.1)`",
        absent=(),
        fixed=["""
            import torch.nn.functional as F
            x = torch.randn(5, requires_grad=True)
            h = x * 2
            h = F.leaky_relu(h, -0.1)
            loss = (h * h).sum()
            loss.backward()
            print(round(loss.item(), 4), [round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            h = 2 * torch.randn(5)
            slope = torch.where(h > 0, 1.0, -0.1)
            out = h * slope
            print(round((out * out).sum().item(), 4), [round(g, 4) for g in (2 * out * slope * 2).tolist()])
        """),
    # detach_() of a tensor a product saved: detach the name, keep the graph already built
    "saved_detached": dict(
        kind="saved-detached-inplace",
        bug="""
            x = torch.randn(3, requires_grad=True)
            y = x.exp()
            z = y * y
            y.detach_()
            z.sum().backward()
            print([round(g, 4) for g in x.grad.tolist()], int(y.requires_grad))
        """,
        fragment="replace the line with `y = y.detach()`",
        absent=(),
        fixed=["""
            x = torch.randn(3, requires_grad=True)
            y = x.exp()
            z = y * y
            y = y.detach()
            z.sum().backward()
            print([round(g, 4) for g in x.grad.tolist()], int(y.requires_grad))
        """],
        reference="""
            x = torch.randn(3)
            print([round(g, 4) for g in (2 * (2 * x).exp()).tolist()], 0)
        """),
    "vmap_plain_buffer": dict(
        kind="vmap-inplace",
        bug="""
            def f(x):
                buf = torch.zeros(x.shape)
                buf.add_(x * 2)
                return buf.sum()


            xs = torch.randn(3, 4)
            print([round(v, 4) for v in torch.vmap(f)(xs).tolist()])
        """,
        fragment="`buf = torch.zeros_like(x)`",
        absent=(),
        fixed=["""
            def f(x):
                buf = torch.zeros_like(x)
                buf.add_(x * 2)
                return buf.sum()


            xs = torch.randn(3, 4)
            print([round(v, 4) for v in torch.vmap(f)(xs).tolist()])
        """],
        reference="""
            xs = torch.randn(3, 4)
            print([round(float((row * 2).sum()), 4) for row in xs])
        """),
    "vmap_python_branch": dict(
        kind="functorch-transform",
        bug="""
            def f(x):
                if x.sum() > 0:
                    return x * 2
                return x


            xs = torch.randn(5, 4)
            print([round(v, 4) for v in torch.vmap(f)(xs).sum(1).tolist()])
        """,
        fragment="`torch.where(cond, a, b)`",
        absent=(),
        fixed=["""
            def f(x):
                return torch.where(x.sum() > 0, x * 2, x)


            xs = torch.randn(5, 4)
            print([round(v, 4) for v in torch.vmap(f)(xs).sum(1).tolist()])
        """],
        reference="""
            xs = torch.randn(5, 4)
            print([round(float((row * 2 if row.sum() > 0 else row).sum()), 4) for row in xs])
        """),
    "tangent_shape": dict(
        kind="forward-ad",
        bug="""
            import torch.autograd.forward_ad as fwAD
            primal = torch.randn(4)
            tangent = torch.randn(3)
            with fwAD.dual_level():
                d = fwAD.make_dual(primal, tangent)
                out = fwAD.unpack_dual(d.sin()).tangent
            print([round(v, 4) for v in out.tolist()])
        """,
        fragment="`torch.randn_like(primal)`",
        absent=(),
        fixed=["""
            import torch.autograd.forward_ad as fwAD
            primal = torch.randn(4)
            tangent = torch.randn_like(primal)
            with fwAD.dual_level():
                d = fwAD.make_dual(primal, tangent)
                out = fwAD.unpack_dual(d.sin()).tangent
            print([round(v, 4) for v in out.tolist()])
        """],
        reference="""
            primal = torch.randn(4)
            tangent = torch.randn(4)
            print([round(v, 4) for v in (primal.cos() * tangent).tolist()])
        """),
    "detached_by_mistake": dict(
        kind="no-grad-fn",
        bug="""
            x = torch.randn(3, requires_grad=True)
            h = (x * 2).detach()
            loss = (h * h).sum()
            loss.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """,
        fragment="Drop the `.detach()` at line 6 (use `x * 2` itself)",
        absent=(),
        fixed=["""
            x = torch.randn(3, requires_grad=True)
            h = x * 2
            loss = (h * h).sum()
            loss.backward()
            print([round(g, 4) for g in x.grad.tolist()])
        """],
        reference="""
            print([round(g, 4) for g in (8 * torch.randn(3)).tolist()])
        """),
    # entropy of probabilities with a zero: 0 * log(0) is meant as 0
    "log_of_zero": dict(
        kind="non-finite-value",
        bug="""
            p = torch.tensor([0.5, 0.0, 0.25], requires_grad=True)
            loss = -(p * torch.log(p)).sum()
            loss.backward()
            assert torch.isfinite(p.grad).all(), "non-finite grad"
            print(round(loss.item(), 4))
        """,
        fragment="`torch.log(x.clamp_min(1e-8))`",
        absent=(),
        fixed=["""
            p = torch.tensor([0.5, 0.0, 0.25], requires_grad=True)
            loss = -(p * torch.log(p.clamp_min(1e-8))).sum()
            loss.backward()
            assert torch.isfinite(p.grad).all(), "non-finite grad"
            print(round(loss.item(), 4))
        """],
        reference="""
            p = torch.tensor([0.5, 0.0, 0.25])
            print(round(-torch.special.xlogy(p, p).sum().item(), 4))
        """),
    # the initial weights kept, then the optimizer moves them
    "kept_initial_weights": dict(
        kind="kept-value-changed",
        bug="""
            w = torch.nn.Parameter(torch.randn(3))
            opt = torch.optim.SGD([w], lr=0.1)
            init = w.detach()
            for _ in range(2):
                opt.zero_grad()
                (w * w).sum().backward()
                opt.step()
            print([round(v, 4) for v in init.tolist()], round((w - init).abs().sum().item(), 4))
        """,
        fragment="`.detach().clone()`",
        absent=(),
        fixed=["""
            w = torch.nn.Parameter(torch.randn(3))
            opt = torch.optim.SGD([w], lr=0.1)
            init = w.detach().clone()
            for _ in range(2):
                opt.zero_grad()
                (w * w).sum().backward()
                opt.step()
            print([round(v, 4) for v in init.tolist()], round((w - init).abs().sum().item(), 4))
        """],
        reference="""
            w0 = torch.randn(3)
            print([round(v, 4) for v in w0.tolist()], round((w0 * 0.8 ** 2 - w0).abs().sum().item(), 4))
        """),
    "duplicate_counts": dict(
        kind="duplicate-index-write",
        bug="""
            counts = torch.zeros(4)
            idx = torch.tensor([0, 1, 1, 3, 3, 3])
            counts[idx] += 1
            print(counts.tolist())
        """,
        fragment="`counts.index_add_(0, idx, values)`",
        fragment2="`torch.bincount(idx)`",
        absent=(),
        fixed=["""
            counts = torch.zeros(4)
            idx = torch.tensor([0, 1, 1, 3, 3, 3])
            counts.index_add_(0, idx, torch.ones(len(idx)))
            print(counts.tolist())
        """, """
            counts = torch.zeros(4)
            idx = torch.tensor([0, 1, 1, 3, 3, 3])
            counts.index_put_((idx,), torch.ones(len(idx)), accumulate=True)
            print(counts.tolist())
        """, """
            counts = torch.zeros(4)
            idx = torch.tensor([0, 1, 1, 3, 3, 3])
            counts = torch.bincount(idx)
            print(counts.tolist())
        """],
        reference="""
            print([float([0, 1, 1, 3, 3, 3].count(i)) for i in range(4)])
        """),
    # a weight halved through .data between the forward pass and backward: meant as a step after it
    "data_write_before_backward": dict(
        kind="silent-saved-tensor-write",
        bug="""
            w = torch.randn(3, requires_grad=True)
            y = (w * w).sum()
            w.data.mul_(0.5)
            y.backward()
            print([round(g, 4) for g in w.grad.tolist()], [round(v, 4) for v in w.tolist()])
        """,
        fragment="`with torch.no_grad(): w.mul_(0.5)`",
        absent=("clone()",),
        fixed=["""
            w = torch.randn(3, requires_grad=True)
            y = (w * w).sum()
            y.backward()
            with torch.no_grad(): w.mul_(0.5)
            print([round(g, 4) for g in w.grad.tolist()], [round(v, 4) for v in w.tolist()])
        """],
        reference="""
            w0 = torch.randn(3)
            print([round(g, 4) for g in (2 * w0).tolist()], [round(v, 4) for v in (0.5 * w0).tolist()])
        """),
    # a gradient penalty through a custom Function whose backward is @once_differentiable
    "once_differentiable_penalty": dict(
        kind="double-backward-unsupported",
        bug="""
            from torch.autograd.function import once_differentiable


            class Cube(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x ** 3

                @staticmethod
                @once_differentiable
                def backward(ctx, g):
                    x, = ctx.saved_tensors
                    return 3 * x * x * g


            x = torch.randn(3, requires_grad=True)
            l = (Cube.apply(x) ** 2).sum()
            g, = torch.autograd.grad(l, x, create_graph=True)
            (l + (g * g).sum()).backward()
            print([round(v, 4) for v in x.grad.tolist()])
        """,
        fragment="Remove `@once_differentiable` from that backward",
        absent=(),
        fixed=["""
            class Cube(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x ** 3

                @staticmethod
                def backward(ctx, g):
                    x, = ctx.saved_tensors
                    return 3 * x * x * g


            x = torch.randn(3, requires_grad=True)
            l = (Cube.apply(x) ** 2).sum()
            g, = torch.autograd.grad(l, x, create_graph=True)
            (l + (g * g).sum()).backward()
            print([round(v, 4) for v in x.grad.tolist()])
        """],
        # l = sum x^6, g = 6 x^5: d/dx (l + sum g^2) = 6 x^5 + 360 x^9
        reference="""
            x = torch.randn(3).double()
            print([round(v, 4) for v in (6 * x ** 5 + 360 * x ** 9).tolist()])
        """),
    # a custom Function's backward returning the gradient in its output's shape, not its input's
    "gradient_of_the_output_shape": dict(
        kind="invalid-gradient",
        bug="""
            class Flat(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.reshape(-1) * 2

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2


            x = torch.randn(2, 3, requires_grad=True)
            (Flat.apply(x) ** 2).sum().backward()
            print([round(v, 4) for v in x.grad.flatten().tolist()])
        """,
        fragment="`grad.reshape(x.shape)`",
        fragment2="save its shape/dtype/device on `ctx` in forward",
        absent=(),
        fixed=["""
            class Flat(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.shape = x.shape
                    return x.reshape(-1) * 2

                @staticmethod
                def backward(ctx, grad):
                    return (grad * 2).reshape(ctx.shape)


            x = torch.randn(2, 3, requires_grad=True)
            (Flat.apply(x) ** 2).sum().backward()
            print([round(v, 4) for v in x.grad.flatten().tolist()])
        """],
        reference="""
            print([round(v, 4) for v in (8 * torch.randn(2, 3)).flatten().tolist()])
        """),
    # a running total that keeps every step's graph: the printed mean is what the program meant
    "total_keeps_graphs": dict(
        kind="graph-kept-alive",
        bug="""
            lin = torch.nn.Linear(64, 64)
            opt = torch.optim.SGD(lin.parameters(), lr=0.01)
            total = 0
            for step in range(12):
                loss = lin(torch.randn(32, 64)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss
            print(round(float(total.detach()) / 12, 4))
        """,
        fragment="`total += loss.item()`",
        absent=(),
        fixed=["""
            lin = torch.nn.Linear(64, 64)
            opt = torch.optim.SGD(lin.parameters(), lr=0.01)
            total = 0
            for step in range(12):
                loss = lin(torch.randn(32, 64)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item()
            print(round(float(total) / 12, 4))
        """],
        reference="""
            lin = torch.nn.Linear(64, 64)
            losses = []
            for step in range(12):
                x = torch.randn(32, 64)
                loss = lin(x).pow(2).mean()
                gw, gb = torch.autograd.grad(loss, [lin.weight, lin.bias])
                with torch.no_grad():
                    lin.weight -= 0.01 * gw
                    lin.bias -= 0.01 * gb
                losses.append(loss.item())
            print(round(sum(losses) / 12, 4))
        """),
    # the first row of each batch kept: a 4 KB view pinning a 1 MB storage
    "first_rows_kept": dict(
        kind="view-pins-storage",
        bug="""
            firsts = []
            for step in range(12):
                batch = torch.randn(256, 1024)
                firsts.append(batch[0])
            print(round(sum(float(f.sum()) for f in firsts), 3))
        """,
        fragment="`firsts.append(batch[0].clone())`",
        absent=(),
        fixed=["""
            firsts = []
            for step in range(12):
                batch = torch.randn(256, 1024)
                firsts.append(batch[0].clone())
            print(round(sum(float(f.sum()) for f in firsts), 3))
        """],
        reference="""
            print(round(sum(float(torch.randn(256, 1024)[0].sum()) for _ in range(12)), 3))
        """),
    # detached outputs cached every step in host memory: `.cpu()` would change nothing (NOTE [A host
    # container's fix]); bounding the cache keeps what the program reads
    "host_cache_grows": dict(
        kind="container-grows",
        bug="""
            lin = torch.nn.Linear(512, 512)
            cache = {}
            for step in range(12):
                out = lin(torch.randn(64, 512))
                cache[step] = out.detach()
                out.pow(2).mean().backward()
            print(round(float(cache[11].sum()), 3))
        """,
        fragment="clear the container each step or epoch (`.clear()`)",
        absent=(".cpu()",),
        unfixed="""
            lin = torch.nn.Linear(512, 512)
            cache = {}
            for step in range(12):
                out = lin(torch.randn(64, 512))
                cache[step] = out.detach().cpu()
                out.pow(2).mean().backward()
            print(round(float(cache[11].sum()), 3))
        """,
        fixed=["""
            lin = torch.nn.Linear(512, 512)
            cache = {}
            for step in range(12):
                out = lin(torch.randn(64, 512))
                cache.clear()
                cache[step] = out.detach()
                out.pow(2).mean().backward()
            print(round(float(cache[11].sum()), 3))
        """],
        reference="""
            lin = torch.nn.Linear(512, 512)
            with torch.no_grad():
                outs = [lin(torch.randn(64, 512)) for _ in range(12)]
            print(round(float(outs[-1].sum()), 3))
        """),
    # the same backward, differentiated from a gradient that did not require grad: torch raises the
    # no-grad-fn error, not its once_differentiable one (NOTE [A gradient without a graph])
    "once_differentiable_no_graph": dict(
        kind="no-grad-fn",
        bug="""
            from torch.autograd.function import once_differentiable


            class Cube(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x ** 3

                @staticmethod
                @once_differentiable
                def backward(ctx, g):
                    x, = ctx.saved_tensors
                    return 3 * x * x * g


            x = torch.randn(3, requires_grad=True)
            g, = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
            g.sum().backward()
            print([round(v, 4) for v in x.grad.tolist()])
        """,
        fragment="Remove `@once_differentiable` at line 15",
        # what it said before: x already requires grad
        absent=("Create the tensors you want gradients for",),
        fixed=["""
            class Cube(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x ** 3

                @staticmethod
                def backward(ctx, g):
                    x, = ctx.saved_tensors
                    return 3 * x * x * g


            x = torch.randn(3, requires_grad=True)
            g, = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
            g.sum().backward()
            print([round(v, 4) for v in x.grad.tolist()])
        """],
        reference="""
            print([round(v, 4) for v in (6 * torch.randn(3)).tolist()])
        """),
    # a metric computed by a second forward pass in training mode: BatchNorm counts each batch twice
    "metric_in_train_mode": dict(
        kind="running-stats-updated-twice",
        bug="""
            model = torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.randn(8, 4)
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    score = model(x).abs().mean()
            print([round(v, 4) for v in model[0].running_mean.tolist()], model[0].num_batches_tracked.item())
        """,
        fragment="(`model.eval()` and `torch.no_grad()`, then `model.train()`)",
        absent=(),
        fixed=["""
            model = torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                x = torch.randn(8, 4)
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                model.eval()
                with torch.no_grad():
                    score = model(x).abs().mean()
                model.train()
            print([round(v, 4) for v in model[0].running_mean.tolist()], model[0].num_batches_tracked.item())
        """],
        # one update per batch: momentum 0.1 from zero
        reference="""
            torch.nn.Linear(4, 3)
            mean = torch.zeros(4)
            for step in range(3):
                mean = 0.9 * mean + 0.1 * torch.randn(8, 4).mean(0)
            print([round(v, 4) for v in mean.tolist()], 3)
        """),
    # a teacher given the student's own tensors, then moved toward the student each step (an EMA)
    "teacher_assigned_student_tensors": dict(
        kind="shared-state",
        bug="""
            student = torch.nn.Linear(3, 2)
            teacher = torch.nn.Linear(3, 2)
            teacher.load_state_dict(student.state_dict(), assign=True)
            opt = torch.optim.SGD(student.parameters(), lr=0.1)
            for step in range(3):
                loss = student(torch.randn(5, 3)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    for pt, ps in zip(teacher.parameters(), student.parameters()):
                        pt.mul_(0.9).add_(0.1 * ps)
            print(round(teacher.weight.sum().item(), 4), round(student.weight.sum().item(), 4))
        """,
        fragment="`load_state_dict(state_dict)` without `assign=True`",
        absent=(),
        fixed=["""
            student = torch.nn.Linear(3, 2)
            teacher = torch.nn.Linear(3, 2)
            teacher.load_state_dict(student.state_dict())
            opt = torch.optim.SGD(student.parameters(), lr=0.1)
            for step in range(3):
                loss = student(torch.randn(5, 3)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    for pt, ps in zip(teacher.parameters(), student.parameters()):
                        pt.mul_(0.9).add_(0.1 * ps)
            print(round(teacher.weight.sum().item(), 4), round(student.weight.sum().item(), 4))
        """],
        reference="""
            lin = torch.nn.Linear(3, 2)
            torch.nn.Linear(3, 2)
            w, b = lin.weight.detach().clone(), lin.bias.detach().clone()
            tw = w.clone()
            for step in range(3):
                x = torch.randn(5, 3)
                w.requires_grad_(), b.requires_grad_()
                gw, gb = torch.autograd.grad((x @ w.T + b).pow(2).mean(), [w, b])
                w, b = (w - 0.1 * gw).detach(), (b - 0.1 * gb).detach()
                tw = 0.9 * tw + 0.1 * w
            print(round(tw.sum().item(), 4), round(w.sum().item(), 4))
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
        jobs += [("python", f) for f in fixed]  # python's own stderr of each fix, read below
    dropped = [(name, len(jobs) + i) for i, name in enumerate(n for n in CASES if "dropped" in CASES[n])]
    jobs += [("python", _write(tmp_path / f"{name}_dropped.py", CASES[name]["dropped"])) for name, _ in dropped]
    unfixed = [(name, len(jobs) + i) for i, name in enumerate(n for n in CASES if "unfixed" in CASES[n])]
    jobs += [("tensorscope", "explain", "--json", _write(tmp_path / f"{name}_unfixed.py", CASES[name]["unfixed"]))
             for name, _ in unfixed]
    results = run_many(jobs)
    for name, at in unfixed:  # the fix text it used to give: the rewritten program fails the same way
        _, _, err, doc = results[at]
        assert doc is not None, (name, err[-2000:])
        kinds = [f["kind"] for f in [doc["diagnosis"]] + doc["hazards"] if f]
        assert CASES[name]["kind"] in kinds, (name, kinds)
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
            # --json: the program's stdout goes to stderr, after what python itself writes there first
            # (torch 2.15 warns that torch.jit.script is deprecated when forward_ad's make_dual first loads
            # its decompositions: python's run of the same fix says so too) and before tensorscope's own
            # lines; values as the reference's up to float rounding (the reference computes them in another
            # order)
            py_rc, py_out, py_err = results[at + 2 + n + i]
            assert py_rc == 0 and py_out.strip(), (name, i, py_err[-2000:])
            assert err.startswith(py_err), (name, i, py_err[-2000:], err[:2000])
            got = _numbers(err[len(py_err):].replace("\r", "").splitlines()[0])
            assert got == _numbers(py_out.splitlines()[0]), (name, i, py_out, err[:500])
            assert got == pytest.approx(_numbers(want), rel=1e-4, abs=1e-4), (name, i, want, err[:500])
