# source: https://github.com/pytorch/pytorch/pull/149543
# expect-kind: view-inplace
# Splitting a fused qkv projection with unbind() and scaling q in place: q is
# one of several views returned by one function.
import torch

torch.manual_seed(0)
proj = torch.nn.Linear(4, 12)
x = torch.randn(2, 4)
qkv = proj(x).view(2, 3, 4).transpose(0, 1)
q, k, v = qkv.unbind(0)
q *= 0.5  # <- culprit
(q @ k.t() @ v).sum().backward()
