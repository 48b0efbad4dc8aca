# expect-kind: inplace-modified-saved-tensor
# expect-alias: h
# expect-node: SigmoidBackward0
# A training loop that starts masking activations in place from step 2 on.
import torch

torch.manual_seed(0)
x = torch.randn(8, 4)
w = torch.randn(4, 4, requires_grad=True)
mask = torch.rand(8, 4) < 0.3
for step in range(4):
    h = torch.sigmoid(x @ w)  # <- saved
    if step >= 2:
        h[mask] = 0.0  # <- culprit
    loss = h.sum()
    loss.backward()  # <- backward
    with torch.no_grad():
        w -= 0.01 * w.grad
        w.grad = None
    print(step, loss.item())
