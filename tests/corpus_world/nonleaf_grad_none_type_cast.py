# source: https://github.com/pytorch/pytorch/issues/10065
# expect-kind: non-leaf-grad-none
# The weights are created and then cast with .type(torch.float64): the cast
# result is not a leaf, its .grad stays None and the manual update fails.
import torch

w1 = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w1 = w1.type(torch.float64)  # <- culprit
for step in range(2):
    o = torch.mean(w1 * torch.tensor([0.5, -1.0, 2.0], dtype=w1.dtype))
    o.backward()
    with torch.no_grad():
        w1 -= 0.1 * w1.grad  # <- culprit-alt
