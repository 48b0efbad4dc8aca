"""The loss's finite check and the counted views' kept values, compiled (NOTE [The loss read in place] in
tensorscope/instrument/nonfinite.py, NOTE [A counted view offered to the kept values, compiled] in
tensorscope/instrument/kept.py).

- in process: ``_speedups.finite_scalar`` answers True only where torch finds nothing to check (a one-element CPU
  tensor whose value ``torch.isfinite`` says is finite, or an integer or bool one), for NaN, +-Inf and the largest
  finite values of the six floating dtypes, conjugate and offset views; "cannot say" (None) for the rest (more
  than one element, sparse, meta, a subclass, a ZeroTensor, float8, a value not finite); it makes no autograd node
  (the next node's sequence number is the one torch gives without the read) and keeps nothing;
- in process: the compiled ``on_alias`` leaves the young list the Python body leaves (the same tuples, weak
  references to the same tensors) for views of leaves and of graph outputs, ``detach``/``data`` of either, a
  list of results with non-tensors, a base that is no tensor, past the young list's bound (``settle``), and lets
  the same exception out of a ``grad_fn`` that raises;
- the real CLI: a loss that leaves the dtype's range at one step (float32, bfloat16 and float16, the
  step's batch taken as views on one line) is the sink torch names (the backward's count and line), with the
  accelerator and with ``TENSORSCOPE_PURE_PYTHON=1``, and the run whose loss stays finite is clean.

Skipped where the accelerator is not built (``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest
import torch

from _cli import REPO, line_of, run_many
from tensorscope import compact
from tensorscope.instrument import kept as kept_mod
from tensorscope.instrument import nonfinite, speedups

pytestmark = pytest.mark.skipif(speedups.function("finite_scalar") is None
                                or speedups.function("kept_on_alias") is None,
                                reason="the accelerator is not built (python setup.py build_ext --inplace)")

PROGRAM = REPO / "tests" / "programs" / "speedv20" / "loss_goes_inf.py"
_PURE = {"env": {"TENSORSCOPE_PURE_PYTHON": "1"}}


def _read(t):
    return speedups.function("finite_scalar")(t, torch.Tensor, nonfinite._DTYPE_KINDS, nonfinite._BASE_READS)


def test_the_loss_read_in_place_gives_torchs_answer_and_makes_no_node():
    checked = {True: 0, False: 0}
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128):
        big = torch.finfo(dtype).max
        for value in (0.5, float("nan"), float("inf"), -float("inf"), big, -big):
            for imag in ((False, True) if dtype.is_complex else (False,)):
                v = complex(0, value) if imag else value
                for t in (torch.tensor(v, dtype=dtype), torch.tensor([1, v, 2], dtype=dtype)[1:2],
                          torch.tensor([[v]], dtype=dtype)):
                    finite = bool(torch.isfinite(t).all())
                    assert _read(t) is (True if finite else None), (dtype, value, imag, t.shape)
                    if dtype.is_complex:
                        assert _read(t.conj()) is (True if finite else None)
                    checked[finite] += 1
    assert checked[True] > 20 and checked[False] > 20, checked
    for t in (torch.tensor(3), torch.tensor([True]), torch.tensor([[7]], dtype=torch.int8)):
        assert _read(t) is True  # not floating: nothing to check, as ``_floating`` finds

    class Sub(torch.Tensor):
        pass

    others = [torch.ones(2), torch.ones(0), torch.tensor([1.0]).to_sparse(), torch.ones((), device="meta"),
              torch.tensor(1.0).as_subclass(Sub), torch.nn.Parameter(torch.tensor(1.0)), torch._efficientzerotensor(())]
    if hasattr(torch, "float8_e4m3fn"):
        others.append(torch.tensor(1.0).to(torch.float8_e4m3fn))
    for t in others:
        assert _read(t) is None, t
    # a loss that requires grad: no node is made by the read (the next node's sequence number is as without it)
    def gap(read):
        w = torch.ones(3, requires_grad=True)
        first = (w * 2).sum()
        if read:
            assert _read(first) is True
        return (w * 3).grad_fn._sequence_nr() - first.grad_fn._sequence_nr(), first

    assert gap(True)[0] == gap(False)[0]
    first = gap(True)[1]
    refs, version = sys.getrefcount(first), first._version
    for _ in range(100):
        assert _read(first) is True
    assert (sys.getrefcount(first), first._version) == (refs, version)


def test_the_compiled_on_alias_leaves_what_the_python_body_leaves():
    compiled = kept_mod.kept_values()
    assert type(compiled) is not kept_mod.KeptValues and type(type(compiled).on_alias).__name__ == "method_descriptor"
    plain = kept_mod.KeptValues()
    rec = type("Rec", (), {})()
    frame = sys._getframe()
    site = ("alias", __file__, 7)
    leaf = torch.arange(6.0)
    w = torch.ones(3, requires_grad=True)
    made = w * 2
    cases = [("getitem", leaf, (leaf[1:],)), ("getitem", made, (made[1:],)), ("detach", made, (made.detach(),)),
             ("data", leaf, (leaf.data,)), ("split", leaf, list(leaf.split(2)) + [None, 3]),
             ("getitem", 5, (leaf[:1],)), ("detach", "not a tensor", (leaf[2:],))]
    for op, base, outs in cases:
        for k in (compiled, plain):
            k.young = []
            assert k.on_alias(rec, op, base, outs, frame, site) is None
        got, want = compiled.young, plain.young
        assert len(got) == len(want), (op, got, want)
        for a, b in zip(got, want):
            assert a[0]() is b[0]() and a[1:4] == b[1:4] and a[5:] == b[5:], (op, a, b)
            assert (a[4] is None) == (b[4] is None) and (a[4] is None or a[4]() is b[4]()), (op, a, b)
    # past the young list's bound: both settle (the live ones filed under their storage key), the list starts again
    keep = [leaf[i:] for i in range(kept_mod._MAX_YOUNG + 3)]
    for k in (compiled, plain):
        k.young = []
        for v in keep:
            k.on_alias(rec, "getitem", leaf, (v,), frame, site)
    assert len(compiled.young) == len(plain.young) == 3 and compiled.n == plain.n == kept_mod._MAX_YOUNG
    assert sorted(compiled.keys) == sorted(plain.keys)

    class Odd(torch.Tensor):
        @property
        def grad_fn(self):
            raise ValueError("read")

    odd = torch.zeros(2).as_subclass(Odd)
    for k in (compiled, plain):
        with pytest.raises(ValueError, match="read"):
            k.on_alias(rec, "getitem", odd, (leaf,), frame, site)
    compiled.young = []
    compiled.on_alias(rec, "getitem", leaf, (leaf[1:],), frame)  # no site: the Python body reads the line
    assert compiled.young[0][2:4] == (__file__, frame.f_lineno - 1)


def _truth(dtype, bad):
    """The count of backward calls before the first whose loss torch finds not finite (None: none), the program
    run in process with ``Tensor.backward`` wrapped to ask ``torch.isfinite``."""
    seen = []
    orig = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        seen.append(bool(torch.isfinite(self).all()))
        return orig(self, *args, **kwargs)

    argv, torch.Tensor.backward = sys.argv, backward
    try:
        sys.argv = [str(PROGRAM), dtype, str(bad)]
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(PROGRAM.read_text(), str(PROGRAM), "exec"), {"__name__": "__main__"})
    finally:
        sys.argv, torch.Tensor.backward = argv, orig
    return seen.index(False) if False in seen else None


def test_a_loss_that_leaves_the_range_is_the_sink_torch_names(tmp_path):
    bad = 7
    kinds = [("float32", bad), ("bfloat16", bad), ("float16", bad), ("float32", -1)]
    jobs, keys = [], []
    for dtype, step in kinds:
        for pure in ((0, 1) if (dtype, step) == ("float32", bad) else (0,)):
            out = tmp_path / f"{dtype}_{step}_{pure}.json"
            job = ("tensorscope", "run", "-o", out, PROGRAM, dtype, str(step))
            jobs.append(job + (_PURE,) if pure else job)
            keys.append((dtype, step, pure, out))
    line = line_of(PROGRAM, "loss.backward()")
    for (dtype, step, pure, out), (rc, stdout, err, *_) in zip(keys, run_many(jobs)):
        assert rc == 0 and stdout == f"done {dtype} {step}\n", (dtype, pure, err[-2000:])
        doc = compact.expand(json.loads(out.read_text()))
        found = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        if step < 0:
            assert found == [] and _truth(dtype, step) is None, found
            continue
        assert _truth(dtype, step) == step, dtype  # torch's own answer: the loss of that backward is not finite
        (h,) = found
        sink = h["nonfinite"]["sink"]
        assert (sink["what"], sink["line"], sink["step"]) == ("loss", line, step), (dtype, pure, sink)
