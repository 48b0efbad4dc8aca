# view() reinterprets the same storage with a new shape: a write through either
# tensor is visible in the other. The view is a different Python object, though.
import torch

torch.manual_seed(0)
x = torch.arange(6.0)
v = x.view(2, 3)

print("same storage:", x.untyped_storage()._cdata == v.untyped_storage()._cdata)  # True
print("v._base is x:", v._base is x, "| shapes:", tuple(x.shape), tuple(v.shape))
print("strides: x", x.stride(), "v", v.stride())                                  # (1,) (3, 1)

v[1, 2] = 100.0             # write through the view ...
print("x after v[1, 2] = 100:", x.tolist())                                       # ... seen in x
x[0] = -1.0                 # ... and the other way round
print("v after x[0] = -1:", v.tolist())
print("versions: x", x._version, "v", v._version)                                 # 2 2 (shared)
