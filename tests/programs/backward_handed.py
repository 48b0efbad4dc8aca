# Backward calls that torch hands to __torch_function__: a root of a tensor subclass (autograd.grad and
# autograd.backward), and calls made under a torch-function mode of the program's that passes them on (its
# __torch_function__ calls the function again; a loss's backward() there is Tensor.backward handed over).
# argv[1] == "bad": a saved tensor is written in place before the last call. Each call of the program's is
# marked "# <- call".
import sys

import torch
from torch.overrides import TorchFunctionMode


class Sub(torch.Tensor):
    pass


class Passing(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


x = torch.ones(3, requires_grad=True)
with Passing():
    (g,) = torch.autograd.grad((x * 2).sum(), x)  # <- call
    torch.autograd.backward((x * 3).sum())  # <- call
    (x * 7).sum().backward()  # <- call
print(g.tolist(), x.grad.tolist())
(g,) = torch.autograd.grad((x * 4).sum().as_subclass(Sub), [x])  # <- call
torch.autograd.backward([(x * 5).sum().as_subclass(Sub)], inputs=[x])  # <- call
(x * 6).sum().as_subclass(Sub).backward()  # <- call
print(g.tolist(), x.grad.tolist())
y = x.sigmoid()
root = y.sum().as_subclass(Sub)
if sys.argv[1:] == ["bad"]:
    y.mul_(2)
(g,) = torch.autograd.grad(root, x)  # <- call
print("done", g.tolist())
