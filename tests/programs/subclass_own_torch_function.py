# A tensor subclass with its own __torch_function__ (a logging tensor, as users and libraries write them) beside
# plain tensors: tensorscope cannot read the subclass's tensors without running its code, so it leaves them out,
# and must say so. The loop passes the per-line event cap, which limits no check.
import torch


class Logged(torch.Tensor):
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls += 1
        return super().__torch_function__(func, types, args, kwargs)


w = torch.ones(4, requires_grad=True)
for _ in range(30):
    (w * 2).sum().backward()
x = torch.ones(4, requires_grad=True)
(x.as_subclass(Logged) * 3).sum().backward()
print(w.grad.tolist(), x.grad.tolist(), Logged.calls)
