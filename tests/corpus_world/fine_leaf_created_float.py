# source: https://github.com/pytorch/pytorch/issues/10065
# expect-kind: none
# The weights are created as a float leaf directly, so .grad is populated and
# the manual update works.
import torch

w1 = torch.tensor([1, 2, 3], dtype=torch.float, requires_grad=True)
for step in range(2):
    o = torch.mean(w1 * torch.tensor([0.5, -1.0, 2.0]))
    o.backward()
    with torch.no_grad():
        w1 -= 0.1 * w1.grad
        w1.grad.zero_()
print(w1.tolist())
