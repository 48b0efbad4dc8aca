# Handled on purpose: -inf entries in a logsumexp over rows that keep a finite entry (the log-domain mask).
# expect: clean
import torch

logits = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], requires_grad=True)
mask = torch.tensor([[True, False, True], [False, False, True]])
masked = logits.masked_fill(~mask, float("-inf"))
lse = torch.logsumexp(masked, dim=1)
loss = (lse - logits[:, 2]).sum()
loss.backward()
print("grad", logits.grad)
