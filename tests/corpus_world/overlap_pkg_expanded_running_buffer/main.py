# source: https://github.com/huangleiBuaa/IterNorm-pytorch/issues/2
# expect-kind: overlapping-write
# An iterative-normalisation package registers its running matrix as
# eye().expand(); the training-mode momentum update writes into it.
import torch

from extension.normalization import IterNorm

torch.manual_seed(0)
norm = IterNorm(num_channels=3, num_groups=2)
norm.train()
print(norm(torch.randn(6, 3)).shape)
