# .data shares storage with its source but gets its OWN version counter, whereas
# detach() shares both. So writes through .data are invisible to autograd's
# version check; writes through detach() are seen.
import torch

torch.manual_seed(0)
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
d = a.data                  # same storage, separate version counter
e = a.detach()              # same storage, same version counter

print("a/d same storage:", a.untyped_storage()._cdata == d.untyped_storage()._cdata)  # True
print("a/e same storage:", a.untyped_storage()._cdata == e.untyped_storage()._cdata)  # True

d.mul_(10)
d.add_(1)                   # two writes through .data
print("a after writes via .data:", a.tolist())                       # [11, 21, 31]
print("versions: a", a._version, "d", d._version, "e", e._version)   # 0 2 0: a never noticed

e.add_(1)                   # one write through detach()
print("versions: a", a._version, "d", d._version, "e", e._version)   # 1 2 1: a and e move together
print("d.requires_grad:", d.requires_grad, "| e.requires_grad:", e.requires_grad)
