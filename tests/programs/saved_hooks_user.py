"""The program registers its own saved_tensors_hooks, uses save_on_cpu and disable_saved_tensors_hooks."""
import gc
import weakref

import torch
from torch.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks

counts = {"pack": 0, "unpack": 0}
packed_shapes = []


def pack(t):
    counts["pack"] += 1
    packed_shapes.append(tuple(t.shape))
    return t.detach()


def unpack(t):
    counts["unpack"] += 1
    return t


x = torch.tensor([0.5, 1.0, -2.0], dtype=torch.float64, requires_grad=True)
w = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64, requires_grad=True)
with saved_tensors_hooks(pack, unpack):
    y = (x.sin() * w).exp().sum()
print("after forward", counts, packed_shapes)
y.backward()
print("after backward", counts, x.grad.tolist(), w.grad.tolist())

# With the user's own hooks, autograd does no version check: this silently gives zero gradients.
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
with saved_tensors_hooks(pack, unpack):
    out = a.sigmoid()
out.detach().zero_()
out.sum().backward()
print("user hooks, modified saved output:", a.grad.tolist(), counts)

# Without hooks the same thing must raise the same message.
a.grad = None
out = a.sigmoid()
out.detach().zero_()
try:
    out.sum().backward()
except RuntimeError as err:
    print("error:", err)

# torch.func refuses to run under saved tensor hooks
with saved_tensors_hooks(pack, unpack):
    try:
        torch.func.grad(lambda t: t.sin().sum())(x)
    except Exception as err:
        print("func under hooks:", type(err).__name__, err)

with save_on_cpu(pin_memory=False):
    z = (x * w).tanh().pow(2).sum()
x.grad = None
z.backward()
print("save_on_cpu", x.grad.tolist())

with disable_saved_tensors_hooks("no hooks allowed here"):
    try:
        with saved_tensors_hooks(pack, unpack):
            pass
    except RuntimeError as err:
        print("disabled:", err)
    b = (x * 2).sum()
    print("can still compute under disable", b.requires_grad)

# nested user hooks: only the innermost ones are used
outer = {"n": 0}
with saved_tensors_hooks(lambda t: outer.__setitem__("n", outer["n"] + 1) or t.detach(), lambda t: t):
    with saved_tensors_hooks(pack, unpack):
        r = (x * w).sum()
print("nested", outer, counts)
r.backward()

ref = weakref.ref(out)
del out
gc.collect()
print("freed", ref() is None)
