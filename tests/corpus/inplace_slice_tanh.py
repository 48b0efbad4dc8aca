# expect-kind: inplace-modified-saved-tensor
# expect-node: TanhBackward0
# Damping the first two features in place through a slice of a saved tanh output.
import torch

torch.manual_seed(0)
x = torch.randn(4, 5)
w = torch.randn(5, 3, requires_grad=True)
h = torch.tanh(x @ w)  # <- saved
h[:, :2].mul_(0.5)  # <- culprit
loss = h.pow(2).sum()
loss.backward()  # <- backward
print(w.grad.shape)
