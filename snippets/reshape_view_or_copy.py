# reshape() returns a VIEW when the strides allow it (contiguous input) and a COPY
# otherwise (e.g. a transposed tensor). You cannot tell from the call site which.
import torch

torch.manual_seed(0)
x = torch.arange(6.0).view(2, 3)            # contiguous
r = x.reshape(3, 2)                          # possible as a view
t = x.t()                                    # transposed view, not contiguous
c = t.reshape(6)                             # impossible as a view -> copy

def shares(p, q):
    return p.untyped_storage()._cdata == q.untyped_storage()._cdata

print("x.is_contiguous:", x.is_contiguous(), "| t.is_contiguous:", t.is_contiguous())
print("reshape of contiguous shares storage:", shares(x, r))   # True
print("transpose shares storage:", shares(x, t), "stride", t.stride())  # True (1, 3)
print("reshape of transposed shares storage:", shares(x, c))   # False
x[0, 0] = 42.0
print("r[0, 0] after write to x:", r[0, 0].item())             # 42.0 (view)
print("c[0] after write to x:", c[0].item())                   # 0.0 (copy)
