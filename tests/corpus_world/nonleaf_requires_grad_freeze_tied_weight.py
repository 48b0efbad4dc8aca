# source: https://github.com/facebookresearch/fairscale/issues/1126
# expect-kind: non-leaf-requires-grad
# The layer's weight attribute is computed from a master parameter (a view of a
# shard), so the freezing loop's `module.weight.requires_grad = ...` hits a non-leaf.
import torch
import torch.nn as nn


class ShardedLinear(nn.Module):
    def __init__(self, master, rows):
        super().__init__()
        self.master = master
        self.weight = master[rows]
        self.bias = nn.Parameter(torch.zeros(self.weight.shape[0]))

    def forward(self, x):
        return x @ self.weight.t() + self.bias


torch.manual_seed(0)
master = nn.Parameter(torch.randn(8, 4))
layers = nn.ModuleList([ShardedLinear(master, slice(0, 4)), ShardedLinear(master, slice(4, 8))])
freeze = True
for module in layers:
    module.weight.requires_grad = not freeze  # <- culprit
print(sum(l(torch.randn(2, 4)).sum() for l in layers))
