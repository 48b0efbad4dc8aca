# source: https://github.com/pytorch/pytorch/issues/69204
# expect-kind: overlapping-write
# A batch of 2x2 Jacobians initialised with eye().expand() and then filled
# row by row: J[:, i, :] is one row of memory seen five times.
import torch

torch.manual_seed(0)
batch = 5
J = torch.eye(2).unsqueeze(0).expand(batch, 2, 2)
rows = torch.randn(2, batch, 2)
for i in range(2):
    J[:, i, :] = rows[i]  # <- culprit
print(J.sum())
