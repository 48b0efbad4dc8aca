# detach() returns a new tensor object over the SAME storage and the SAME version
# counter, with requires_grad=False and no grad_fn. Writing through the detached
# tensor changes the source and bumps the version both of them report.
import torch

torch.manual_seed(0)
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
d = a.detach()

print("same storage:", a.untyped_storage()._cdata == d.untyped_storage()._cdata)  # True
print("same data_ptr:", a.data_ptr() == d.data_ptr())                               # True
print("d.requires_grad:", d.requires_grad, "| d.grad_fn:", d.grad_fn, "| d.is_leaf:", d.is_leaf)
print("versions before write: a", a._version, "d", d._version)                     # 0 0

d.mul_(2)                   # in-place write through the detached alias
print("a after d.mul_(2):", a.tolist())                                             # [2, 4, 6]
print("versions after write:  a", a._version, "d", d._version)                     # 1 1 (shared counter)
