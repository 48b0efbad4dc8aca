"""Saved-tensor hooks must be invisible: the same errors (byte for byte), gradients and memory.

See NOTE [Saved-tensor hooks switch off the version check] in tensorscope/instrument/saved.py.
Only `tensorscope explain` registers the hooks (NOTE [Hooks only under explain]), so each program
runs under plain python and under `tensorscope explain -o`, and the two must agree on stdout,
stderr and exit status (explain exits 1 where it reports a hazard in a program that exits 0).
`run` registers none: tests/test_invisible_hooks.py compares it with python.
"""

from __future__ import annotations

import textwrap

import pytest

from _cli import run_cli, run_python

VERSION_ERRORS = {
    "sigmoid_output": """
        import torch
        a = torch.tensor([1., 2, 3], requires_grad=True)
        out = a.sigmoid()
        out.detach().zero_()
        out.sum().backward()
    """,
    "view_written_through_detach": """
        import torch
        x = torch.tensor([1., 1, 1], requires_grad=True)
        y = torch.tensor([2., 4, 6], requires_grad=True).view(-1, 1)
        z = torch.matmul(x.view(1, 3), y)
        tmp = y.detach()
        tmp.mul_(2)
        z.backward()
    """,
    "leaf_input_of_mm_under_no_grad": """
        import torch
        a = torch.randn(3, 3, requires_grad=True)
        w = torch.randn(3, 3, requires_grad=True)
        o = (a * 1).mm(w)
        with torch.no_grad():
            w.add_(1)
        o.sum().backward()
    """,
    "double_exp_setitem": """
        import torch
        a = torch.randn(4, dtype=torch.float64, requires_grad=True)
        b = a.exp()
        b.detach()[0] = 1
        b.sum().backward()
    """,
    # the saved input's grad_fn after the write is ClampBackward1 / DivBackward2 / a custom
    # Function's: torch names them "Clamp1", "Div2", "Scale" in the message (found on nanoGPT)
    "saved_input_rewritten_by_overload_one": """
        import torch
        a = torch.randn(3, requires_grad=True)
        h = a * 1
        y = h.exp() * h
        h.clamp_(min=0)
        y.sum().backward()
    """,
    "saved_input_rewritten_by_overload_two": """
        import torch
        a = torch.randn(3, requires_grad=True)
        h = a * 1
        y = h.exp() * h
        h.div_(2.0, rounding_mode="floor")
        y.sum().backward()
    """,
    "saved_output_of_a_custom_function": """
        import torch

        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2

        a = torch.randn(3, requires_grad=True)
        h = Scale.apply(a)
        y = h.exp() * h
        h.detach().add_(1)
        y.sum().backward()
    """,
    "zero_dim_tanh_iadd": """
        import torch
        x = torch.tensor(0.5, requires_grad=True)
        y = x.tanh()
        y += 1
        y.backward()
    """,
    "relu_inplace_after_sigmoid": """
        import torch
        import torch.nn as nn
        m = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid(), nn.ReLU(inplace=True))
        m(torch.randn(2, 4)).sum().backward()
    """,
    "anomaly_mode_on": """
        import torch
        torch.autograd.set_detect_anomaly(True)
        a = torch.tensor([1., 2, 3], requires_grad=True)
        out = a.exp()
        out.add_(1)
        out.sum().backward()
    """,
    "half_dtype_and_nonleaf_input": """
        import torch
        a = torch.randn(2, 3, requires_grad=True)
        h = (a * 2).to(torch.float16)
        w = torch.randn(3, 2, dtype=torch.float16, requires_grad=True)
        o = h @ w
        h.mul_(3)
        o.sum().backward()
    """,
    "custom_function_saved_output": """
        import torch
        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * x
                ctx.save_for_backward(y)
                return y
            @staticmethod
            def backward(ctx, g):
                (y,) = ctx.saved_tensors
                return g * 2 * y.sqrt()
        x = torch.tensor([2.0, 3.0], requires_grad=True)
        y = Square.apply(x)
        y.mul_(2)
        y.sum().backward()
    """,
    "caught_and_printed": """
        import torch, traceback
        a = torch.tensor([1., 2], requires_grad=True)
        o = a.sigmoid()
        o.zero_()
        try:
            o.sum().backward()
        except RuntimeError:
            traceback.print_exc()
        print("after")
    """,
}

GRADIENTS = {
    "silent_data_write": """
        import torch
        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp()
        y.data.zero_()
        y.sum().backward()
        print(x.grad.tolist())
    """,
    "data_assign_on_saved_input": """
        import torch
        w = torch.tensor([1.0, 2.0], requires_grad=True)
        x = torch.tensor([3.0, 4.0], requires_grad=True)
        h = x * 1
        out = (h * w).sum()
        h.data = torch.tensor([10.0, 20.0])
        out.backward()
        print(w.grad.tolist(), x.grad.tolist())
    """,
    "double_backward": """
        import torch
        x = torch.tensor([0.3, -1.2, 2.0], requires_grad=True)
        y = (x.sin() * x.exp()).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        g.pow(2).sum().backward()
        print([round(v, 12) for v in x.grad.tolist()])
    """,
    "training_steps": """
        import torch
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
        opt = torch.optim.Adam(m.parameters(), lr=0.1)
        x = torch.randn(16, 5)
        for _ in range(5):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
        print(repr(loss.item()), [round(p.sum().item(), 10) for p in m.parameters()])
    """,
    "torch_func_and_checkpoint": """
        import torch
        from torch.utils.checkpoint import checkpoint
        f = lambda x: (x.sin() ** 2).sum()
        x = torch.tensor([0.1, 0.2, 0.3])
        print(torch.func.grad(f)(x).tolist())
        print(torch.func.hessian(f)(x).diagonal().tolist())
        w = torch.tensor([0.5, -0.5, 2.0], requires_grad=True)
        for reentrant in (True, False):
            out = checkpoint(lambda t: (t * w).tanh().sum(), x.requires_grad_(), use_reentrant=reentrant)
            out.backward()
            print(reentrant, w.grad.tolist())
            w.grad = None
    """,
    "no_leak_of_saved_outputs": """
        import gc, weakref, torch
        refs = []
        for i in range(20):
            a = torch.randn(1000, requires_grad=True)
            out = a.sigmoid().exp()
            refs.append(weakref.ref(out))
            out.sum().backward()
            del out
        gc.collect()
        print(sum(r() is None for r in refs), "of", len(refs), "freed")
        a = torch.randn(10, requires_grad=True)
        y = a.exp()
        r = weakref.ref(y)
        del y
        gc.collect()
        print("graph-only output freed:", r() is None)
    """,
}


def _write(tmp_path, name, code):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(code).lstrip())
    return p


# explain exits 1 where it reports a hazard in a program that exits 0 (a caught failure is no diagnosis:
# the program handled it, see NOTE in tensorscope/diagnose.py)
HAZARDS = {"silent_data_write", "data_assign_on_saved_input"}


# Python's reference forks from the fork server (tests/_cli.py), as explain's run does: the subject is
# what the program prints, raises and computes. Anomaly mode prints the forward call's stack whole, and in a
# fork that stack holds the fork server's frames: that program's reference is a fresh interpreter.
WHOLE_STACK_PRINTED = {"anomaly_mode_on"}


def _compare(tmp_path, name, code):
    prog = _write(tmp_path, name, code)
    rc, out, err = run_python(prog, cwd=tmp_path, fresh=name in WHOLE_STACK_PRINTED)
    trc, tout, terr, _ = run_cli("explain", "-o", str(tmp_path / "r.json"), str(prog), cwd=tmp_path)
    assert (trc, tout) == (1 if name in HAZARDS else rc, out)
    assert terr == err
    return rc, out, err


@pytest.mark.parametrize("name", sorted(VERSION_ERRORS))
def test_version_errors_are_byte_identical(tmp_path, name):
    rc, out, err = _compare(tmp_path, name, VERSION_ERRORS[name])
    assert "modified by an inplace operation" in err


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_and_memory_are_identical(tmp_path, name):
    rc, out, err = _compare(tmp_path, name, GRADIENTS[name])
    assert rc == 0, err
    assert out
    if name == "no_leak_of_saved_outputs":  # the figures themselves, on the same two runs
        assert "20 of 20 freed" in out
        assert "graph-only output freed: True" in out
