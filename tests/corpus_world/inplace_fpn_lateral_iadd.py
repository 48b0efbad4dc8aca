# source: https://github.com/lyongo/NWPU-MOC/issues/4
# expect-kind: inplace-modified-saved-tensor
# expect-node: ReluBackward0
# FPN top-down pathway: laterals[i - 1] += upsample(laterals[i]) writes into a
# relu output that ReluBackward0 saved.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
convs = torch.nn.ModuleList([torch.nn.Conv2d(2, 2, 1) for _ in range(2)])
feats = [torch.randn(1, 2, 8, 8), torch.randn(1, 2, 4, 4)]
laterals = [F.relu(c(f)) for c, f in zip(convs, feats)]  # <- saved
laterals[0] += F.interpolate(laterals[1], size=(8, 8), mode="nearest")  # <- culprit
loss = sum(l.mean() for l in laterals)
loss.backward()  # <- backward
