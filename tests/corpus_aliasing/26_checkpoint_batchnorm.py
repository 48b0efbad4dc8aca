# From: pytorch/pytorch#96136 and gpleiss/efficient_densenet_pytorch#73: BatchNorm inside torch.utils.checkpoint updates its running stats twice (our own program)
import copy

import torch
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU())
ref = copy.deepcopy(block)  # the same block without checkpointing: one update per batch
x = torch.randn(16, 6, requires_grad=True)
for step in range(2):
    out = checkpoint(block, x, use_reentrant=False)
    out.pow(2).mean().backward()  # <- culprit
    with torch.no_grad():
        ref(x)
bn, bn_ref = block[1], ref[1]
print("num_batches_tracked", bn.num_batches_tracked.item(), "vs", bn_ref.num_batches_tracked.item())
print("TRUTH changed=%s" % (not torch.allclose(bn.running_mean, bn_ref.running_mean)))
