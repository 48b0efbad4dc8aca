# requires_grad_() on a detached tensor turns it into a NEW leaf with its own
# graph. It still shares storage with the source, but gradients computed through
# it never reach the source, and vice versa.
import torch

torch.manual_seed(0)
a = torch.tensor(1.0, requires_grad=True)
b = a.detach()
print("b.requires_grad after detach:", b.requires_grad)          # False
b.requires_grad_()                                               # b is now its own leaf
print("b.requires_grad:", b.requires_grad, "| b.is_leaf:", b.is_leaf)
print("same storage:", a.untyped_storage()._cdata == b.untyped_storage()._cdata)  # True

y = a ** 2                  # graph 1: depends on a
z = b * 3                   # graph 2: depends on b only
y.backward()
z.backward()
print("a.grad:", a.grad.item())     # 2.0 (only from y)
print("b.grad:", b.grad.item())     # 3.0 (only from z)
