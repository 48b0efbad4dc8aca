"""Exceptions raised inside calls tensorscope wraps, caught by the program, their tracebacks printed.

Under `tensorscope run` every traceback must be the one plain python prints (no frame of the
wrapper that let the exception through), on every Python, and the program's tracer stays None.
"""
import sys
import threading
import traceback

import torch


def show(title, fn):
    try:
        fn()
    except Exception:
        print(f"--- {title}")
        print(traceback.format_exc(), end="")
    print("tracer:", sys.gettrace())


def stale_backward():
    x = torch.ones(3, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    y.sum().backward()


def leaf_write():
    w = torch.ones(2, requires_grad=True)
    w.add_(1)


def bad_view():
    torch.arange(6.0).view(4)


def bad_data():
    t = torch.ones(2)
    t.data = [1, 2]


def bad_requires_grad():
    torch.arange(3).requires_grad_()


def through_torch():
    # the write is called by torch's own Python code (torch.nn.functional.relu -> torch.relu_)
    torch.nn.functional.relu(torch.ones(2, requires_grad=True), inplace=True)


class Refuses(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise ValueError("no forward today")

    @staticmethod
    def backward(ctx, g):
        return g


def custom_function():
    Refuses.apply(torch.ones(2, requires_grad=True))


def optimizer_load():
    opt = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=0.1)
    opt.load_state_dict({"state": {}, "param_groups": []})


def register_parameter():
    torch.nn.Linear(2, 2).register_parameter("weight", torch.ones(2))


def hook_without_grad():
    torch.ones(2).register_hook(lambda g: g)


CASES = [("backward", stale_backward), ("leaf write", leaf_write), ("view", bad_view),
         ("data", bad_data), ("requires_grad_", bad_requires_grad), ("through torch", through_torch),
         ("custom Function", custom_function), ("optimizer state", optimizer_load),
         ("parameter", register_parameter), ("hook", hook_without_grad)]
for title, fn in CASES:
    show(title, fn)

# the same in a thread (python's threading machinery under the frames, no strip by the runner)
worker = threading.Thread(target=lambda: [show(f"thread {title}", fn) for title, fn in CASES])
worker.start()
worker.join()

# the same exceptions caught in the calling frame itself, and one chained
try:
    torch.arange(6.0).view(4)
except RuntimeError as e:
    print("".join(traceback.format_tb(e.__traceback__)), end="")
try:
    try:
        leaf_write()
    except RuntimeError as e:
        raise ValueError("wrapped") from e
except ValueError:
    traceback.print_exc(file=sys.stdout)
print("tracer:", sys.gettrace())
leaf_write()
