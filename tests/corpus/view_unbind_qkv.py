# expect-kind: view-inplace
# expect-alias: q
# Scaling the query in place after unbind(): unbind returns several views of one
# tensor, and autograd forbids modifying them in place.
import torch
import torch.nn as nn

torch.manual_seed(0)
proj = nn.Linear(8, 3 * 8)
x = torch.randn(2, 5, 8)
qkv = proj(x).reshape(2, 5, 3, 8).permute(2, 0, 1, 3)
q, k, v = qkv.unbind(0)
q.mul_(8 ** -0.5)  # <- culprit
attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
(attn @ v).sum().backward()
