"""Names that look like tool internals, a monkeypatched Tensor method, a __torch_function__ subclass,
and the program's own TorchDispatchMode."""
import gc
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_recorder = ["user recorder"]
_state = {"step": 0}
tensorscope = "not the tool"
ACTIVE = False
_orig = torch.Tensor.add_
_tool = None
__tensorscope__ = 1
calls = [0]


def counting_add_(self, *args, **kwargs):
    calls[0] += 1
    return _orig(self, *args, **kwargs)


torch.Tensor.add_ = counting_add_
x = torch.zeros(3)
x.add_(1)
x.add_(torch.ones(3), alpha=2)
x += 1  # __iadd__ does not go through add_
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
model(torch.ones(4, 2)).sum().backward()
opt.step()
torch.Tensor.add_ = _orig
x.add_(1)
print("add_ calls", calls[0], x.tolist(), x._version, torch.Tensor.add_ is _orig)
print("names", _recorder, _state, tensorscope, ACTIVE, _tool, __tensorscope__)


class Tagged(torch.Tensor):
    log = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.log.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


t = torch.arange(4.0).as_subclass(Tagged)
r = (t * 2).sum()
t.add_(1)
t[0] = 5
print("subclass", type(r).__name__, r.item(), t.tolist(), Tagged.log)
Tagged.log.clear()
leaf = torch.ones(2).as_subclass(Tagged).requires_grad_()
(leaf * 3).sum().backward()
print("subclass backward", Tagged.log, type(leaf.grad).__name__)


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


a = torch.tensor([1.0, 2.0], requires_grad=True)
with OpLog() as mode:
    b = a * 2
    b.detach().add_(1)
    c = b.sin().sum()
    c.backward()
print("dispatch ops", mode.ops)
print("grad", a.grad.tolist())

ref = weakref.ref(b)
del b, c, mode
gc.collect()
print("freed", ref() is None)
