# expect-kind: inplace-modified-saved-tensor
# expect-node: MulBackward0
# A recurrence filled into a preallocated tensor: mul saves the view out[i - 1],
# and the very same statement then writes into `out`, making that view stale.
import torch

torch.manual_seed(0)
decay = torch.tensor(0.9, requires_grad=True)
x = torch.randn(5)
out = x.clone()
for i in range(1, 5):
    out[i] = out[i - 1] * decay + x[i]  # <- saved <- culprit
loss = out.sum()
loss.backward()  # <- backward
print(decay.grad)
