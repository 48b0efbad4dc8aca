# source: https://github.com/pytorch/pytorch/issues/69204
# expect-kind: none
# The fix from the report: clone() the expanded tensor before writing rows.
import torch

J = torch.eye(2).unsqueeze(0).expand(5, 2, 2)
J = J.clone()
for i in range(2):
    J[:, i, :] = torch.randn(5, 2)
print(J.shape)
