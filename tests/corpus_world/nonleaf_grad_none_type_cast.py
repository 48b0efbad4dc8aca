# source: https://github.com/pytorch/pytorch/issues/10065
# expect-kind: non-leaf-grad-none
# The weights are created as integers and cast with .type(torch.float): the cast
# result is not a leaf, its .grad stays None and the manual update fails.
import torch

w = torch.tensor([1, 2, 3], dtype=torch.float64, requires_grad=True)
w1 = w.type(torch.float)  # <- culprit
for step in range(2):
    o = torch.mean(w1 * torch.tensor([0.5, -1.0, 2.0]))
    o.backward()
    with torch.no_grad():
        w1 -= 0.1 * w1.grad  # <- culprit-alt
