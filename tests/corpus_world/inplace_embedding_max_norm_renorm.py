# source: https://github.com/pytorch/pytorch/issues/26596
# expect-kind: inplace-modified-saved-tensor
# nn.Embedding(max_norm=...) renormalises its weight in place in forward; the
# weight was already used (and saved) by a matmul before the lookup.
import torch
import torch.nn as nn

torch.manual_seed(0)
n, d, m = 3, 5, 7
embedding = nn.Embedding(n, d, max_norm=True)
W = torch.randn((m, d), requires_grad=True)
idx = torch.tensor([1, 2])
a = embedding.weight @ W.t()  # <- saved
out = a.unsqueeze(0)
out = out + (embedding(idx) @ W.t()).unsqueeze(1)  # <- culprit
loss = out.sigmoid().prod()
loss.backward()  # <- backward
