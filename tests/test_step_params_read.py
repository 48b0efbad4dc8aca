"""The parameters' finite check after an optimizer step, read in place by the accelerator (NOTE [A step's
parameters read in place] in tensorscope/instrument/nonfinite.py).

- in process: ``_speedups.finite_params`` gives torch's own answer (``torch.isfinite(p).all()`` over the floating
  parameters) for NaN, +-Inf and the largest finite values of float16, bfloat16, float32, float64 and the complex
  dtypes, contiguous, transposed, strided, expanded, zero-size and 0-dim; "cannot say" (None) for what it does not
  read (sparse, meta, float8, a subclass, a ZeroTensor, a tuple of parameters), and it writes and keeps nothing
  (versions and reference counts unchanged);
- the real CLI: a program whose step makes one parameter non-finite (a transposed float16 among parameters of six
  kinds, read after a backward; and a second optimizer's parameter the program set to NaN, checked where no
  backward's gradients wait) names the sink torch names (the step's count and line, from torch's own step hooks
  in process), the first also with ``TENSORSCOPE_PURE_PYTHON=1``; the twin whose values stay finite is clean.

Skipped where the accelerator is not built (``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

import pytest
import torch

from _cli import REPO, run_many
from tensorscope import compact
from tensorscope.instrument import speedups
from tensorscope.instrument.recorder import _INSPECTABLE

pytestmark = pytest.mark.skipif(getattr(speedups.compiled(), "finite_params", None) is None,
                                reason="the accelerator is not built (python setup.py build_ext --inplace)")

PROGRAM = REPO / "tests" / "programs" / "step_params" / "params_overflow.py"
_PURE = {"env": {"TENSORSCOPE_PURE_PYTHON": "1"}}


def _read(params):
    return speedups.compiled().finite_params([{"params": params}], _INSPECTABLE, torch._C._to_dlpack)


def _torch_says(params) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in params if p.is_floating_point() or p.is_complex())


def test_finite_params_gives_torchs_answer_and_keeps_nothing():
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128]
    layouts = [((5,), lambda t: t), ((3, 4), lambda t: t.t()), ((4, 6), lambda t: t[:, ::2]),
               ((2, 3, 4), lambda t: t.permute(2, 0, 1)[1:]), ((1,), lambda t: t.expand(3)), ((0,), lambda t: t),
               ((), lambda t: t)]
    checked = {True: 0, False: 0}
    for dtype in dtypes:
        big = torch.finfo(dtype).max
        for value in (0.5, float("nan"), float("inf"), -float("inf"), big):
            for shape, view in layouts:
                for imag in ((False, True) if dtype.is_complex else (False,)):
                    base = torch.zeros(shape, dtype=dtype)
                    if base.numel():
                        flat = base.view(-1)
                        flat[-1] = complex(0, value) if imag else value
                    t = view(base)
                    for p in (torch.nn.Parameter(t, requires_grad=False), t):
                        want = _torch_says([p])
                        assert _read([p]) == (1 if want else False), (dtype, value, shape, imag, p.stride())
                        checked[want] += 1
    assert checked[True] > 100 and checked[False] > 100, checked
    # integer and bool parameters are not floating: not counted, never read as non-finite
    assert _read([torch.arange(3), torch.tensor([True]), torch.ones(2)]) == 1
    c = torch.tensor([1 + 2j, complex(float("nan"), 0)]).conj()  # a conjugate view: its values' finiteness is its bits'
    assert _read([c]) is False and not _torch_says([c])

    class Sub(torch.Tensor):
        pass

    for other in (torch.zeros(3).to_sparse(), torch.zeros(3, device="meta"), torch.zeros(3).as_subclass(Sub),
                  torch._efficientzerotensor(3)):
        assert _read([torch.zeros(2), other]) is None, other
    if hasattr(torch, "float8_e4m3fn"):
        assert _read([torch.zeros(3).to(torch.float8_e4m3fn)]) is None
    read = speedups.compiled().finite_params
    assert read([{"params": (torch.zeros(2),)}], _INSPECTABLE, torch._C._to_dlpack) is None  # not a list
    two = [{"params": [torch.zeros(2)]}, {"params": [torch.tensor([float("inf")])]}]
    assert read(two, _INSPECTABLE, torch._C._to_dlpack) is False and read([], _INSPECTABLE, torch._C._to_dlpack) == 0
    p = torch.nn.Parameter(torch.randn(4, 4))
    refs, version = sys.getrefcount(p), p._version
    for _ in range(200):
        assert _read([p]) == 1
    assert (sys.getrefcount(p), p._version) == (refs, version)


def _truth(which, device="cpu"):
    """(step, line) of the first optimizer step after which a floating parameter of that optimizer is not finite,
    from torch's own step hooks (None: never)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    seen = {"count": 0, "first": None}

    def after(opt, args, kwargs):
        params = [p for g in opt.param_groups for p in g["params"]]
        if seen["first"] is None and not _torch_says(params):
            line = next(f.lineno for f in reversed(traceback.extract_stack()) if f.filename == str(PROGRAM))
            seen["first"] = (seen["count"], line)
        seen["count"] += 1

    handle = register_optimizer_step_post_hook(after)
    argv = sys.argv
    try:
        sys.argv = [str(PROGRAM), which, device]
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(PROGRAM.read_text(), str(PROGRAM), "exec"), {"__name__": "__main__"})
    finally:
        sys.argv = argv
        handle.remove()
    return seen["first"]


def test_a_step_that_makes_a_parameter_non_finite_is_the_sink_both_ways(tmp_path):
    _the_sink_is_torchs(tmp_path, ["a", "f", "none"], "cpu")  # the other kinds, dtypes, layouts: the test above


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_parameters_on_the_gpu_are_not_read_and_the_step_is_still_the_sink(tmp_path):
    """A CUDA parameter is never read from the host: "cannot say" (None), also beside a CPU parameter that is not
    finite, and the Python check answers instead (the sink torch names, at the step's count and line)."""
    on_gpu = torch.full((3,), float("nan"), device="cuda")
    assert _read([on_gpu]) is None and _read([torch.tensor([float("nan")]), torch.zeros(2, device="cuda")]) is None
    assert _read([torch.zeros(4, device="cuda").t()]) is None
    _the_sink_is_torchs(tmp_path, ["a", "c", "e", "f", "none"], "cuda")


def _the_sink_is_torchs(tmp_path, kinds, device):
    jobs, keys = [], []
    for which in kinds:
        for pure in ((0, 1) if which == "a" else (0,)):
            out = tmp_path / f"{which}_{pure}.json"
            job = ("tensorscope", "run", "-o", out, PROGRAM, which, device)
            jobs.append(job + (_PURE,) if pure else job)
            keys.append((which, pure, out))
    results = run_many(jobs)
    docs = {}
    for (which, pure, out), (rc, stdout, err, *_) in zip(keys, results):
        assert rc == 0 and stdout == f"done {which}\n", (which, pure, err[-2000:])
        with open(out) as f:
            docs[(which, pure)] = compact.expand(json.load(f))
    for which in kinds:
        truth = _truth(which, device)
        assert (truth is None) == (which == "none"), (which, truth)
        found = [h for h in docs[(which, 0)]["hazards"] if h["kind"] == "silent-non-finite-value"]
        if truth is None:
            assert found == [], found
        else:
            (h,) = found
            sink = h["nonfinite"]["sink"]
            assert (sink["what"], sink["step"], sink["line"]) == ("parameter", truth[0], truth[1]), (which, sink)
        if (which, 1) in docs:  # the Python check gives the same finding
            assert [h.get("nonfinite") for h in docs[(which, 1)]["hazards"]] == \
                [h.get("nonfinite") for h in docs[(which, 0)]["hazards"]], which
