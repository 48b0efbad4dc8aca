# source: https://github.com/lyongo/NWPU-MOC/issues/4
# expect-kind: none
# The fix from the report: laterals[i - 1] = laterals[i - 1] + upsample(...)
# builds a new tensor instead of writing relu's saved output.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
convs = torch.nn.ModuleList([torch.nn.Conv2d(2, 2, 1) for _ in range(2)])
feats = [torch.randn(1, 2, 8, 8), torch.randn(1, 2, 4, 4)]
laterals = [F.relu(c(f)) for c, f in zip(convs, feats)]
laterals[0] = laterals[0] + F.interpolate(laterals[1], size=(8, 8), mode="nearest")
loss = sum(l.mean() for l in laterals)
loss.backward()
print("grad", convs[1].weight.grad.sum().item())
