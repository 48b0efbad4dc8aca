# expect-kind: inplace-modified-saved-tensor
# expect-alias: w
# expect-node: PowBackward0
# Manual weight decay under torch.no_grad() applied between the forward pass
# and backward: no_grad does not stop the version counter from moving.
import torch

torch.manual_seed(0)
w = torch.randn(5, requires_grad=True)
x = torch.randn(5)
loss = (w ** 2).sum() + (w * x).sum()  # <- saved
with torch.no_grad():
    w -= 0.01 * w  # <- culprit
loss.backward()  # <- backward
print(w.grad)
