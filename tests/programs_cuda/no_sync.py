# Counts every call that reads tensor values to the host (and so synchronises with a GPU):
# a dispatch mode counts the aten ops, wrappers count the Python-level calls. Under
# tensorscope the counts must be those of plain python: tensorscope adds no such call.
# Usage: python no_sync.py [cpu|cuda]
import collections
import sys

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
counts = collections.Counter()
SYNCING = {"_local_scalar_dense", "is_nonzero", "equal", "nonzero", "_to_copy", "copy_", "item",
           "allclose", "masked_select", "unique", "_unique2", "tolist"}


class Count(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in SYNCING:
            counts["aten." + name] += 1
        return func(*args, **(kwargs or {}))


inside = set()


def counted(owner, name):
    orig = getattr(owner, name)

    def wrapper(*args, **kwargs):
        # A torch-function mode (torch.set_default_device, tensorscope --device) re-enters a
        # Tensor method through torch.Tensor's attribute: count the outermost call only.
        if name in inside:
            return orig(*args, **kwargs)
        counts[name] += 1
        if owner is torch.cuda and not torch.cuda.is_available():
            return None
        inside.add(name)
        try:
            return orig(*args, **kwargs)
        finally:
            inside.discard(name)

    setattr(owner, name, wrapper)


for name in ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__repr__", "__format__"):
    counted(torch.Tensor, name)
counted(torch.cuda, "synchronize")

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True), nn.Linear(16, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(32, 8, device=device)
target = torch.randn(32, 4, device=device)
losses = []
with Count():
    for step in range(5):
        opt.zero_grad()
        h = model[0](data)
        v = h.view(-1)
        d = h.detach()
        d.mul_(1.0)
        y = model[2](model[1](h))
        out = y.sigmoid()
        loss = ((out - target) ** 2).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model[0].weight.data.clamp_(-1, 1)
        losses.append(loss.detach())
    last = losses[-1].item()
counts["synchronize"] += 0
counted_calls = dict(sorted(counts.items()))
print("value reads:", counted_calls)
print("loss:", round(last, 4))
