# source: https://github.com/idiap/fast-transformers/pull/10
# expect-kind: inplace-modified-saved-tensor
# expect-node: MmBackward0
# Recurrent linear attention keeps a running state S and adds k^T v into it in
# place; the previous step's S @ q product saved S.
import torch

torch.manual_seed(0)
q = torch.randn(3, 1, 4, requires_grad=True)
k = torch.randn(3, 1, 4, requires_grad=True)
v = torch.randn(3, 1, 4, requires_grad=True)
S = torch.zeros(4, 4)
outs = []
for t in range(3):
    S += k[t].t() @ v[t]  # <- culprit
    outs.append(q[t] @ S)  # <- saved
loss = torch.cat(outs).sum()
loss.backward()  # <- backward
