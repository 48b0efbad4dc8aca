# source: https://github.com/huangleiBuaa/IterNorm-pytorch/issues/2
# expect-kind: overlapping-write
# A bias broadcast with expand() and then accumulated into with add_().
import torch

torch.manual_seed(0)
bias = torch.randn(1, 3)
acc = bias.expand(4, 3)
acc.add_(torch.randn(4, 3))  # <- culprit
print(acc)
