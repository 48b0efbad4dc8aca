"""inference_mode, no_grad as a decorator, set_grad_enabled(False), allow_mutation_on_saved_tensors."""
import gc
import weakref

import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

with torch.inference_mode():
    y = x * 2
    yv = y[1:]
print("inference", y.requires_grad, y.is_inference(), yv.is_inference(), torch.is_inference_mode_enabled())
try:
    y.add_(1)
except RuntimeError as err:
    print("error:", err)
try:
    (y * x).sum().backward()
except RuntimeError as err:
    print("error:", err)


@torch.no_grad()
def triple(t):
    return t * 3, torch.is_grad_enabled()


@torch.inference_mode()
def quad(t):
    return t * 4


@torch.enable_grad()
def inner(t):
    return t * 5


r, enabled = triple(x)
print("no_grad decorator", r.requires_grad, enabled, torch.is_grad_enabled())
q = quad(x)
print("inference decorator", q.requires_grad, q.is_inference())
with torch.no_grad():
    s = inner(x)
print("enable_grad inside no_grad", s.requires_grad, s.grad_fn.name())

torch.set_grad_enabled(False)
z = x * 2
print("set_grad_enabled(False)", z.requires_grad, torch.is_grad_enabled())
torch.set_grad_enabled(True)
with torch.set_grad_enabled(False):
    z2 = x * 2
print("set_grad_enabled ctx", z2.requires_grad, torch.is_grad_enabled())

# a view created in no_grad, then modified with grad enabled
base = x * 1
with torch.no_grad():
    view = base[:2]
try:
    view.mul_(2)
except RuntimeError as err:
    print("error:", err)

# allow_mutation_on_saved_tensors: mutating a saved tensor is allowed and grads use the old value
with torch.autograd.graph.allow_mutation_on_saved_tensors():
    a = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = a.clone()
    out = (b ** 2).sum()
    b.sin_()
    out.backward()
    print("allow_mutation", a.grad.tolist(), b.tolist(), b._version)
a.grad = None
b = a.clone()
out = (b ** 2).sum()
b.sin_()
try:
    out.backward()
except RuntimeError as err:
    print("error:", err)

torch.autograd.set_grad_enabled(True)
print("final", torch.is_grad_enabled(), torch.is_inference_mode_enabled())
ref = weakref.ref(y)
del y, yv
gc.collect()
print("inference tensor freed", ref() is None)
