"""Ctrl-C while a tensor is freed (docs/faults.md, "is interrupted by Ctrl-C").

The weak reference of ``wire`` marks SIGINT as arrived from C code (``_thread.interrupt_main``, as the
signal's C handler does), then ``t`` is freed by the same ``del``: the next Python code that runs hears it.
Under python that is this program's next line; under tensorscope it used to be the weak reference callback
that forgets ``t``'s id, where Python drops the KeyboardInterrupt (or the handler's own exception). Three
times: python's handler, caught; a handler of the program's that raises, caught; python's again, uncaught.
"""
import _thread
import functools
import operator
import signal
import weakref

import torch


class Tripwire(weakref.ref):
    trip = staticmethod(functools.partial(_thread.interrupt_main, signal.SIGINT))


class Target:
    pass


class Stop(Exception):
    pass


def stop(signum, frame):
    raise Stop(f"stopped by signal {signum} in {frame.f_code.co_name}, line {frame.f_lineno}")


def step(i):
    t = torch.ones(4, requires_grad=True) * i
    target = Target()
    wire = Tripwire(target, operator.methodcaller("trip"))
    both = [t, target]
    del t, target
    del both  # frees target (SIGINT marked as arrived), then t
    print("after", i, flush=True)
    return wire


print("the handler is", signal.getsignal(signal.SIGINT).__name__, flush=True)
try:
    for i in range(3):
        step(i)
except KeyboardInterrupt:
    print("KeyboardInterrupt at iteration", i, flush=True)
previous = signal.signal(signal.SIGINT, stop)
print("signal.signal returned", previous.__name__, flush=True)
try:
    for i in range(3):
        step(i)
except Stop as e:
    print(e, "at iteration", i, flush=True)
print("the handler is", signal.getsignal(signal.SIGINT).__name__, flush=True)
signal.signal(signal.SIGINT, previous)
for i in range(3):
    step(i)
print("not reached")
