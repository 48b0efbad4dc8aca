# source: https://github.com/xu-ji/IIC/issues/116
# expect-kind: overlapping-write
# Marginals broadcast with expand() and then floored in place by mask
# assignment: the k x k view has one row of memory.
import torch

torch.manual_seed(0)
k = 4
logits = torch.randn(k, k, requires_grad=True)
p_i_j = logits.softmax(dim=1) / k
p_i = p_i_j.sum(dim=1).view(k, 1).expand(k, k)
EPS = 0.2
p_i[(p_i < EPS).data] = EPS  # <- culprit
loss = -(p_i_j * torch.log(p_i)).sum()
loss.backward()
