# expect-kind: backward-twice
# expect-node: SigmoidBackward0
# Calling backward() a second time on the same loss, e.g. to "accumulate" grads.
import torch

torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
y = torch.sigmoid(x)  # <- saved
loss = y.sum()
loss.backward()  # <- culprit
print(x.grad)
loss.backward()  # <- backward
