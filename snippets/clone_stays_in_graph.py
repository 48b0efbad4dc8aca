# clone() copies the data into NEW storage, yet the copy stays in the autograd
# graph: gradient reaching the clone is handed back to its source (CloneBackward0).
# The clone is not a leaf, so its own .grad stays None; the source leaf accumulates.
import torch

torch.manual_seed(0)
a = torch.tensor(1.0, requires_grad=True)   # leaf
b = a.clone()                                # non-leaf copy, grad_fn=CloneBackward0

same = a.untyped_storage()._cdata == b.untyped_storage()._cdata
print("a and b share storage:", same)                   # False: clone copies
print("b.grad_fn:", type(b.grad_fn).__name__, "| b.is_leaf:", b.is_leaf)

y = a ** 2                 # dy/da = 2a = 2
y.backward()
print("a.grad after y.backward():", a.grad.item())      # 2.0

z = b * 3                  # dz/db = 3, routed through the clone back to a
z.backward()
print("a.grad after z.backward():", a.grad.item())      # 2 + 3 = 5.0 (accumulated)
print("b.retains_grad:", b.retains_grad, "-> b.grad is None:", b.grad is None)
