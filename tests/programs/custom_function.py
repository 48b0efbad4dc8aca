"""Custom autograd.Functions: save_for_backward, returning a view, mark_dirty (in place), saved output modified."""
import gc
import weakref

import torch
from torch.autograd import Function


class MulSave(Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x


class ExpSaveOut(Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out


class FlatView(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return g.view(ctx.shape)


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


x = torch.tensor([1.5, -0.5, 2.0], dtype=torch.float64, requires_grad=True)
y = torch.tensor([0.25, 3.0, -1.0], dtype=torch.float64, requires_grad=True)
MulSave.apply(x, y).sum().backward()
print("MulSave", x.grad.tolist(), y.grad.tolist())

x.grad = None
e = ExpSaveOut.apply(x)
print("ExpSaveOut grad_fn", type(e.grad_fn).__name__, e.grad_fn.name())
e.sum().backward()
print("ExpSaveOut", x.grad.tolist())

# the saved output is modified in place: backward must raise the same error text
e = ExpSaveOut.apply(x)
e.mul_(3)
try:
    e.sum().backward()
except RuntimeError as err:
    print("error:", err)

m = torch.arange(6, dtype=torch.float64).reshape(2, 3).requires_grad_()
v = FlatView.apply(m)
print("FlatView", v._is_view(), v._base is m, v.grad_fn.name(), v.untyped_storage().data_ptr() == m.untyped_storage().data_ptr())
(v * torch.arange(6, dtype=torch.float64)).sum().backward()
print("FlatView grad", m.grad.tolist())

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a.clone()
before = b._version
c = DoubleInPlace.apply(b)
print("DoubleInPlace", c is b, before, b._version, c.grad_fn.name())
(c * c).sum().backward()
print("DoubleInPlace grad", a.grad.tolist())

# mark_dirty on a view of a non-leaf: the base gets rebased
a.grad = None
base = a * 1
row = base[1:]
out = DoubleInPlace.apply(row)
print("view dirty", out is row, base.grad_fn.name(), row.grad_fn.name(), base.tolist(), base._version)
base.pow(2).sum().backward()
print("view dirty grad", a.grad.tolist())

# mark_dirty on a leaf requiring grad must fail the same way
try:
    DoubleInPlace.apply(a)
except RuntimeError as err:
    print("error:", err)

ref = weakref.ref(e)
del e
gc.collect()
print("freed", ref() is None)
