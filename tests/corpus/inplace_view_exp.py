# expect-kind: inplace-modified-saved-tensor
# expect-alias: flat
# expect-node: ExpBackward0
# exp saves its output; writing through a .view() of it bumps the shared version.
import torch

torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
y = torch.exp(x)  # <- saved
flat = y.view(-1)
flat.add_(1.0)  # <- culprit
loss = y.mean()
loss.backward()  # <- backward
print(x.grad)
