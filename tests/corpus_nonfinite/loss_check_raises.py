# Rewritten from nuplan-devkit#91 / skorch-dev/skorch#136 style loss checks: the loop stops when the loss is NaN.
# expect: kind=non-finite-value line=11 op=log phase=forward sink=none
import torch

torch.manual_seed(0)
w = torch.tensor([1.0, -2.0], requires_grad=True)
x = torch.tensor([[1.0, 0.5], [0.5, 1.0]])
opt = torch.optim.SGD([w], lr=0.1)
for step in range(3):
    score = x @ w
    loss = -torch.log(score).mean()
    if torch.isnan(loss):
        raise ValueError(f"loss is nan at step {step}")
    opt.zero_grad()
    loss.backward()
    opt.step()
