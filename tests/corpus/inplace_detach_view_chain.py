# expect-kind: inplace-modified-saved-tensor
# expect-alias: buf
# expect-node: TanhBackward0
# A "scratch buffer" made by detaching and flattening the activation still
# shares storage and version counter with it.
import torch

torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
act = torch.tanh(x)  # <- saved
buf = act.detach().view(-1)
buf[0] = 1.0  # <- culprit
loss = act.sum()
loss.backward()  # <- backward
print(x.grad)
