"""A training loop whose loss goes NaN (log of 0, then a diverging step): its output, warning and exception
must be the same under tensorscope run (whose non-finite checks read values without changing any)."""
import math
import warnings

import torch

torch.manual_seed(0)
w = torch.tensor([0.5, -0.5], requires_grad=True)
x = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
opt = torch.optim.SGD([w], lr=0.5)
for step in range(3):
    p = torch.sigmoid(x @ w) * torch.tensor([1.0, 0.0])
    loss = -torch.log(p).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item(), w.grad.tolist(), w.tolist())
    if not math.isfinite(loss.item()):
        warnings.warn(f"non-finite loss at step {step}")
raise RuntimeError("loss diverged: " + str(loss.item()))
