# source: https://github.com/huangleiBuaa/IterNorm-pytorch/issues/2
# expect-kind: overlapping-write
# A running whitening-matrix buffer registered as eye().expand(): the
# momentum update writes every group's matrix into the same memory.
import torch
import torch.nn as nn


class IterNormLike(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.register_buffer("running_wm", torch.eye(channels).expand(groups, channels, channels))

    def forward(self, x):
        wm = torch.eye(x.shape[1]).expand_as(self.running_wm) * x.var()
        self.running_wm.mul_(0.9).add_(0.1 * wm)  # <- culprit
        return x


norm = IterNormLike(2, 3)
print(norm(torch.randn(5, 3)).shape)
