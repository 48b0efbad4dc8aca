# x.clone().detach() takes an independent copy: its own
# storage, its own version counter, requires_grad=False, no graph connection.
# (x.detach().clone() gives the same result without recording the clone in the graph.)
import torch

torch.manual_seed(0)
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
c = a.clone().detach()

print("same storage:", a.untyped_storage()._cdata == c.untyped_storage()._cdata)  # False
print("c.requires_grad:", c.requires_grad, "| c.grad_fn:", c.grad_fn, "| c.is_leaf:", c.is_leaf)

c.add_(10)                  # writing the copy leaves the source alone
print("a:", a.tolist())                                                             # [1, 2, 3]
print("c:", c.tolist())                                                             # [11, 12, 13]
print("versions: a", a._version, "c", c._version)                                  # 0 1

a.sum().backward()          # a's graph is unaffected by anything done to c
print("a.grad:", a.grad.tolist())                                                   # [1, 1, 1]
