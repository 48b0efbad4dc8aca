# expect-kind: inplace-modified-saved-tensor
# expect-alias: tmp
# expect-node: MmBackward0
# The seed example: `y` is a view (reshaped column) that matmul saves; scaling a
# detached alias of it in place invalidates the saved value.
import torch

x = torch.tensor([1, 1, 1], dtype=torch.float, requires_grad=True)
y = torch.tensor([2, 4, 6], dtype=torch.float, requires_grad=True).view(-1, 1)
z = torch.matmul(x, y)  # <- saved
tmp = y.detach()
tmp.mul_(2)  # <- culprit
print(z, y.view(-1))
z.backward()  # <- backward
print(x.grad)
