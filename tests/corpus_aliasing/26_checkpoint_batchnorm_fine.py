# Twin of 26: only the Linear is checkpointed; the BatchNorm runs once per batch
import copy

import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU())
ref = copy.deepcopy(block)  # the same block without checkpointing: one update per batch
x = torch.randn(16, 6, requires_grad=True)
for step in range(2):
    h = checkpoint(block[0], x, use_reentrant=False)
    out = block[2](block[1](h))
    out.pow(2).mean().backward()
    with torch.no_grad():
        ref(x)
bn, bn_ref = block[1], ref[1]
print("num_batches_tracked", bn.num_batches_tracked.item(), "vs", bn_ref.num_batches_tracked.item())
print("TRUTH changed=%s" % (not torch.allclose(bn.running_mean, bn_ref.running_mean)))
