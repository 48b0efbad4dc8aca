# The seed example: new_tensor across devices and dtypes, and copy_ from a tensor that
# requires grad. Replacing "cuda" by "cpu" gives the CPU version of the program.
import torch

a = torch.tensor(1.0, device="cuda", requires_grad=True)
b = a.new_tensor(a, device="cpu", dtype=torch.float64)   # a copy: no grad, own storage
c = torch.zeros((), dtype=torch.float64)                          # a CPU tensor, no grad
c.copy_(a)                                                        # copy_ from a tensor requiring grad
print("b:", b.dtype, b.device, b.requires_grad, b.grad_fn)
print("c:", c.dtype, c.device, c.requires_grad, type(c.grad_fn).__name__, c.is_leaf, c._version)
print("c shares storage with a:", c.untyped_storage()._cdata == a.untyped_storage()._cdata)
c.backward()
print("a.grad:", a.grad.item())
