# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# Weight decay applied through w2.data after the forward pass but before
# backward: mm saved w2, so w1's gradient is computed with the decayed weight.
import torch

torch.manual_seed(0)
x = torch.randn(8, 4)
w1 = torch.randn(4, 6, requires_grad=True)
w2 = torch.randn(6, 1, requires_grad=True)
h = torch.tanh(x @ w1)
out = h @ w2  # <- saved
loss = out.pow(2).mean()
w2.data.mul_(0.5)  # <- culprit
loss.backward()  # <- backward
print(w1.grad.norm())
