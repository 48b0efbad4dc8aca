# source: https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795/2
# expect-kind: backward-twice
# expect-node: PowBackward0
# Two losses share an intermediate; the first backward frees it and the second
# one needs it again.
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.randn(5, 3)
h = (x @ w).pow(2)  # <- saved
loss1 = h.mean()
loss2 = h.max()
loss1.backward()  # <- culprit
loss2.backward()  # <- backward
