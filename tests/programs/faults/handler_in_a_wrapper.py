"""A program's signal handler that runs exactly where a torch call returns (issue 22, faults20).

An object whose only reference is in a tensor's autograd node marks SIGUSR1 as arrived, from C, when it dies:
a weak reference callback that is a ``methodcaller`` of a ``functools.partial`` of ``_thread.interrupt_main``,
no Python frame in between. ``detach_()`` drops the node, so under python the handler runs at the check that
follows the call, in the program's frame. The handler says where it ran (the first frame below it that is not
a signal guard of a tool's), calls torch itself, and raises the program's ``Stop``.
"""
import _thread
import functools
import operator
import signal
import sys
import weakref

import torch


class Stop(Exception):
    pass


class Trip(weakref.ref):
    __slots__ = ("trip",)


class Obj:
    pass


def handler(signum, frame):
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name == "guard":
        f = f.f_back
    here = f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_code.co_name}" if f is not None else "-"
    t = torch.zeros(2).add_(1)  # the handler's own torch calls
    print(f"handler given {frame.f_code.co_name}:{frame.f_lineno}, ran in {here}, {t.tolist()}", flush=True)
    raise Stop


def armed(t):
    """``t``'s autograd node holds the only reference to an object whose death marks SIGUSR1 as arrived."""
    o = Obj()
    r = Trip(o, operator.methodcaller("trip"))
    r.trip = functools.partial(_thread.interrupt_main, signal.SIGUSR1)
    t.grad_fn.metadata["k"] = o
    return r


class Momentum(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {"lr": 0.1})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])
                self.state[p]["buf"].detach_()


signal.signal(signal.SIGUSR1, handler)
w = torch.ones(3, requires_grad=True)
a = w * 2
r1 = armed(a)
try:
    a.detach_()
    print("not interrupted")
except Stop:
    print("Stop after detach_", a.grad_fn is None, r1() is None)

opt = Momentum([w])
(w * 3).sum().backward()
with torch.enable_grad():
    opt.state[w]["buf"] = w * 2
r2 = armed(opt.state[w]["buf"])
try:
    opt.step()
    print("not interrupted")
except Stop:
    print("Stop in the step", r2() is None, w.tolist())
print("end")
