# expect-kind: inplace-modified-saved-tensor
# expect-alias: h
# expect-node: SigmoidBackward0
# F.relu_ on a sigmoid output (pointless and harmful: sigmoid saved its output).
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(8, 4)
w = torch.randn(4, 4, requires_grad=True)
h = torch.sigmoid(x @ w)  # <- saved
F.relu_(h)  # <- culprit
loss = h.sum()
loss.backward()  # <- backward
print(w.grad.norm())
