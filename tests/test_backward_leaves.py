"""The leaves a backward call reached (``leaves_with_grad`` of its event), on a small graph walked at
every call and on a graph too large to walk again: see NOTE [Walking a large graph once per line]
in instrument/backward_calls.py. Which parameters have a gradient is what torch itself says (the
program prints it)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests._cli import find_events, load_report, line_of, run_cli, validate_against_schema

PROGRAM = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    big = torch.nn.Sequential(*[m for _ in range(700) for m in (torch.nn.Linear(2, 2), torch.nn.Tanh())])
    small = torch.nn.Linear(2, 1)
    x = torch.randn(4, 2)
    for step in range(3):
        big.zero_grad(set_to_none=True)
        big(x).sum().backward()  # the big graph
        small.zero_grad(set_to_none=True)
        small(x).sum().backward()  # the small graph
    print("big", sum(p.grad is not None for p in big.parameters()), len(list(big.parameters())))
    print("small", sum(p.grad is not None for p in small.parameters()))
""")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("leaves")
    prog = d / "leaves.py"
    prog.write_text(PROGRAM)
    out = d / "r.json"
    rc, stdout, err, _ = run_cli("run", "-o", str(out), str(prog), cwd=d)
    assert rc == 0, err
    doc = load_report(out.read_text())
    assert validate_against_schema(doc)
    return prog, stdout, doc


def _names(doc, tids):
    by_id = {t["id"]: t for t in doc["tensors"]}
    return sorted(n for tid in tids for n in by_id[tid]["names"])


def test_a_large_graph_is_walked_once_per_line(report):
    prog, stdout, doc = report
    assert "big 1400 1400" in stdout  # torch: every parameter of the big model has a gradient
    events = [e for e in find_events(doc, "backward") if e["line"] == line_of(prog, "big(x).sum().backward()")]
    assert len(events) == 3
    expected = sorted(f"big.{i}.{w}" for i in range(0, 1400, 2) for w in ("weight", "bias"))
    first, *later = events
    assert "leaves_walked" not in first
    assert _names(doc, first["leaves_with_grad"]) == expected
    for e in later:
        assert e["leaves_walked"] is False
        assert _names(doc, e["leaves_with_grad"]) == expected


def test_a_small_graph_is_walked_at_every_call(report):
    prog, stdout, doc = report
    assert "small 2" in stdout
    events = [e for e in find_events(doc, "backward") if e["line"] == line_of(prog, "small(x).sum().backward()")]
    assert len(events) == 3
    for e in events:
        assert "leaves_walked" not in e
        assert _names(doc, e["leaves_with_grad"]) == ["small.bias", "small.weight"]


def test_the_probe_finds_the_full_walks_first_leaf():
    """``same_leaves``' probe (NOTE [The probe's first leaf, walked in place] in failure_graph.py) is the full
    walk's first leaf under every bound, on graphs torch builds: a chain, a residual block that reaches a node
    along two paths, a leaf given to backward itself, two roots, a custom Function and a graph with no leaf."""
    import torch

    from tensorscope.instrument.failure_graph import _first_leaf, _leaves_in_order

    torch.manual_seed(0)
    a, b, c = (torch.randn(3, requires_grad=True) for _ in range(3))
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    h = (a * b).sin()
    residual = (h + h.exp() * c + a).sum()

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    cases = {"chain": [net(torch.randn(5, 3)).sum()], "residual": [residual], "leaf": [a],
             "two roots": [(b * 3).sum(), net(c).sum()], "custom": [Twice.apply(b * c).sum()],
             "no leaf": [torch.randn(3).exp().sum()], "none": []}
    for name, roots in cases.items():
        full = list(_leaves_in_order(roots, 1_000, {}))
        for limit in range(0, 12):
            expected = next(_leaves_in_order(roots, limit, {}), None)
            assert _first_leaf(roots, limit) is expected, (name, limit)
        assert _first_leaf(roots, 1_000) is (full[0] if full else None), name
    assert _first_leaf(cases["chain"], 1_000) is net[2].bias  # torch's edges: addmm's bias first
