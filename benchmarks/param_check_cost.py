"""Instructions (valgrind's callgrind) of one finite check of an optimizer's parameters, per way of reading them:
the figures behind NOTE [A step's parameters read in place] (tensorscope/instrument/nonfinite.py).

Usage::

    python benchmarks/param_check_cost.py [CALLS]

Three sets of parameters: small_mlp's 4 (benchmarks/workloads/_mlp.py), gpt_train's 51 (its GPT, the head tied to
the embedding) and many_params' 5,000 (2,500 ``Linear(8, 8)``), all finite, float32, on the CPU, in an SGD's
param_groups. For each, CALLS calls (default 100; 5 for the 5,000) of each way, counted between callgrind's
client requests, give the instructions of one call:

- ``python walk + sums`` (main before speedn19): ``_floating_params`` then ``_sums_finite``;
- ``python walk`` alone (``_floating_params``);
- ``sums`` alone (``_sums_finite``: grad mode off, ``flatten_dense_tensors``, ``sum``, ``item``);
- ``finite_params (C)``: ``_speedups.finite_params`` with ``torch._C._to_dlpack`` (the accelerator's read);
- ``_to_dlpack alone`` (a list comprehension of it: the torch part of the C read);
- ``foreach_norm``: ``torch._foreach_norm``, ``stack``, ``isfinite``, ``all``, ``item``;
- ``cat out=``: ``torch.cat`` of the flat views into a buffer kept per set, ``sum``, ``item`` (grad mode off);
- ``sum each``: one ``sum`` and ``item`` a parameter (grad mode off).

Needs valgrind, its ``callgrind.h`` and a C compiler (as benchmarks/step_instructions.py); the accelerator
built (``python setup.py build_ext --inplace``) for the C row. Run from the repository root with the tree to
measure on ``PYTHONPATH``. Prints instructions per call.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_instructions import callgrind_dumps  # noqa: E402  the same callgrind run and client-request helper


def _outer(calls):
    rows = dict(callgrind_dumps(__file__, [calls], collect_atstart=True))
    print("instructions per call (callgrind); columns: the parameter sets")
    sets = sorted({k.split("|")[0] for k in rows}, key=lambda s: int(s.split()[0]))
    ways = []
    for k in rows:
        w = k.split("|")[1]
        if w not in ways:
            ways.append(w)
    print(f"  {'':28s}" + "".join(f"{s:>16s}" for s in sets))
    for w in ways:
        cells = []
        for s in sets:
            k = f"{s}|{w}"
            cells.append(f"{rows[k] / int(s.split('x')[-1]):16,.0f}" if k in rows else f"{'-':>16s}")
        print(f"  {w:28s}" + "".join(cells))


def _inner(calls):
    import torch
    import torch.nn as nn

    from tensorscope.instrument import nonfinite, speedups
    from tensorscope.instrument.recorder import _INSPECTABLE

    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "workloads"))
    from _mlp import SMALL_MLP, setup

    cg = ctypes.CDLL(os.environ["TS_CG_LIB"])
    small = list(setup(**SMALL_MLP)[2].parameters())
    path = os.path.join(here, "workloads", "gpt_train.py")
    src = open(path).read()
    g = {"__name__": "gpt"}
    argv, sys.argv = sys.argv, [path]
    exec(compile(src[:src.index('if __name__ == "__main__"')], path, "exec"), g)
    sys.argv = argv
    gpt = list(g["GPT"]().parameters())
    many = list(nn.ModuleList(nn.Linear(8, 8) for _ in range(2500)).parameters())
    c = speedups.compiled()
    read = getattr(c, "finite_params", None)
    D = torch._C._to_dlpack

    def foreach_norm(ps):
        return torch.isfinite(torch.stack(torch._foreach_norm(ps, 2))).all().item()

    def cat_out(ps, buf):
        with torch.no_grad():
            torch.cat([p.view(-1) for p in ps], out=buf)
            return buf.sum().item()

    def sum_each(ps):
        with torch.no_grad():
            return [p.sum().item() for p in ps]

    cg.start_instr()
    for params, n in ((small, calls), (gpt, calls), (many, max(1, calls // 20))):
        opt = torch.optim.SGD(params, lr=0.1)
        buf = torch.empty(sum(p.numel() for p in params))
        ways = [("python walk + sums", lambda: nonfinite._sums_finite(nonfinite._floating_params(opt))),
                ("python walk", lambda: nonfinite._floating_params(opt)),
                ("sums", lambda: nonfinite._sums_finite(params))]
        if read is not None:
            ways.append(("finite_params (C)", lambda: read(opt.param_groups, _INSPECTABLE, D)))
        ways += [("_to_dlpack alone", lambda: [D(p) for p in params]),
                 ("foreach_norm", lambda: foreach_norm(params)),
                 ("cat out=", lambda: cat_out(params, buf)),
                 ("sum each", lambda: sum_each(params))]
        for name, f in ways:
            for _ in range(3):
                f()
            cg.zero()
            for _ in range(n):
                f()
            cg.dump(f"{len(params)} params x{n}|{name}".encode())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        _inner(int(sys.argv[2]))
    else:
        _outer(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
