"""A program's tensor subclass whose ``__torch_function__`` marks SIGUSR1 as arrived the first time it runs while
``armed``: across ``model.weight.data = new``. Under python nothing calls it there (the setter is torch's C code);
under tensorscope the setter's record reads the new value (its shape, its strides), which reaches this
``__torch_function__``: the handler must then run once tensorscope's code has returned, in the program's code, and
its exception reach the program's ``try``. Then the program's own ``new.mul_(2)``: there python runs the handler
inside ``__torch_function__``, and so must tensorscope (tests/test_signal_landing.py)."""
import signal
import sys
import _thread

import torch


class Stop(Exception):
    pass


given = []


def handler(signum, frame):
    given.append(frame.f_code.co_name)
    raise Stop


armed = []


class Sub(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if armed:
            armed.clear()
            _thread.interrupt_main(signal.SIGUSR1)
        return super().__torch_function__(func, types, args, kwargs or {})


signal.signal(signal.SIGUSR1, handler)
model = torch.nn.Linear(4, 2)
new = model.weight.detach().clone().as_subclass(Sub)
stops = []
try:
    armed.append(1)
    model.weight.data = new
    armed.clear()
    print("set")
except Stop as e:
    tb, where = e.__traceback__, []
    while tb is not None:
        where.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    stops.append(where)
print("stops", stops, "handler given", given, "data", type(model.weight.data).__name__, file=sys.stderr)
before = new.detach().clone()
try:  # the program's own call: tensorscope's write wrapper calls the original, which calls __torch_function__
    armed.append(1)
    new.mul_(2)
    print("mul_ done")
except Stop as e:  # as under python: the handler ran inside __torch_function__, and mul_ never ran
    tb, where = e.__traceback__, []
    while tb is not None:
        where.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    print("mul_ stopped", where, "unchanged", torch.equal(new, before))
x = torch.ones(3, requires_grad=True)
(x * 3).sum().backward()
print("end", x.grad.tolist())
