"""torch.utils.checkpoint, reentrant and non-reentrant, with dropout (RNG replay)."""
import gc
import weakref

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 2)).double()
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)


def grads():
    return [x.grad.tolist()] + [p.grad.tolist() for p in net.parameters()]


def reset():
    x.grad = None
    net.zero_grad(set_to_none=True)


results = {}
for mode in ("plain", True, False):
    reset()
    torch.manual_seed(1)
    if mode == "plain":
        out = net(x)
    else:
        out = checkpoint(net, x, use_reentrant=mode)
    out.pow(2).sum().backward()
    results[mode] = grads()
    print(mode, results[mode])
print("reentrant == plain", results[True] == results["plain"])
print("non-reentrant == plain", results[False] == results["plain"])

# checkpoint_sequential and a checkpoint whose inputs need no grad (reentrant warns)
reset()
torch.manual_seed(2)
out = checkpoint_sequential(net, 2, x, use_reentrant=False)
out.sum().backward()
print("sequential", grads())
reset()
y = checkpoint(net, torch.ones(1, 4, dtype=torch.float64), use_reentrant=True)
print("no-grad-input output requires_grad", y.requires_grad)

# non-reentrant checkpoint with an in-place op on an intermediate inside
def inner(t):
    u = t * 2
    u.add_(1)
    return u.sin()


reset()
z = checkpoint(inner, x, use_reentrant=False)
z.sum().backward()
print("inner", x.grad.tolist())
ref = weakref.ref(z)
del z, out, y
gc.collect()
print("freed", ref() is None)
print("rng after", torch.randn(3).tolist())
