"""Objects that run code when asked for their class, and a logging tensor subclass, left in the
program's globals when it ends. The end-of-run snapshot must not run any of their code: atexit
handlers (which run after tensorscope's snapshot) print what was touched."""
import atexit
import warnings

import torch
import torch.distributed as dist


class Proxy:
    touched = []

    @property
    def __class__(self):
        Proxy.touched.append("__class__")
        warnings.warn("Proxy.__class__ was read", FutureWarning)
        return int


class Logged(torch.Tensor):
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


proxy = Proxy()
proxies = [Proxy(), Proxy()]
by_name = {"p": Proxy(), "q": (Proxy(),)}
deprecated = [dist.reduce_op]  # reading its __class__ warns (FutureWarning) on torch 2.x
logged = torch.arange(3.0).as_subclass(Logged)
w = torch.nn.Parameter(torch.ones(3))
v = logged[1:]
c = logged.detach().clone()
c.add_(1)
c.mul_(2)
loss = (logged * w).sum()
loss.backward()
print("grad", w.grad.tolist())
calls_at_end = len(Logged.calls)
print("__torch_function__ calls in the program:", calls_at_end, sorted(set(Logged.calls)))


@atexit.register
def after():
    print("class reads after the program:", len(Proxy.touched))
    print("__torch_function__ calls after the program:", len(Logged.calls) - calls_at_end)
