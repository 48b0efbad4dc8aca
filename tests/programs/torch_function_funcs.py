"""What a program's __torch_function__ receives as ``func``: names, equality with torch._C's own methods, dict
lookups keyed by them, and a Parameter deep-copied under a mode (what dynamo's fake copy does)."""
import copy

import torch
from torch.overrides import TorchFunctionMode

BASE = getattr(torch._C, "TensorBase", None) or torch._C._TensorBase
HANDLED = {BASE.clone: "clone", BASE.add_: "add_", BASE.mul: "mul", torch.Tensor.__deepcopy__: "deepcopy"}
seen = []


class Log(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append((getattr(func, "__name__", "?"), HANDLED.get(func), func == BASE.clone, hash(func) == hash(BASE.clone)))
        return func(*args, **(kwargs or {}))


class Fakeish(TorchFunctionMode):
    """Replaces what clone returns when func is torch._C's clone (the way a copy-to-fake mode works)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func == BASE.clone:
            return out.fill_(7.0)
        return out


p = torch.nn.Parameter(torch.ones(3))
t = torch.arange(4.0)
with Log():
    q = copy.deepcopy(p)
    u = t.clone()
    u.add_(1)
    v = u.mul(2)
    _ = u.data
    w = torch.nn.Parameter(torch.zeros(2))
    w.requires_grad_(False)
    _ = w.requires_grad
for row in seen:
    print(*row)
with Fakeish():
    r = copy.deepcopy(torch.nn.Linear(2, 2))
print("copied under the mode", r.weight.tolist(), type(r.weight).__name__)


class Sub(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = HANDLED.get(func)
        out = super().__torch_function__(func, types, args, kwargs or {})
        return ("handled", name) if name == "mul" else out


s = torch.ones(2).as_subclass(Sub)
print("subclass", s.mul(3), type(s.clone()).__name__, s.clone().sum().item())
