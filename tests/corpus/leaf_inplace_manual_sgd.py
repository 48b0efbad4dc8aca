# expect-kind: leaf-inplace
# expect-alias: w
# A hand-written SGD update outside torch.no_grad(): w is a leaf that requires grad.
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(10, 3)
y = x @ torch.tensor([1.0, -2.0, 0.5])
for step in range(3):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    w -= 0.1 * w.grad  # <- culprit
    w.grad.zero_()
