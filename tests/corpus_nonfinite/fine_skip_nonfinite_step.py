# Handled on purpose: a GradScaler-style check; a step whose gradients are not finite is skipped and the scale lowered.
# expect: clean
import torch

w = torch.tensor([1.0, -1.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
scale = 3e38
for step in range(4):
    loss = (w ** 2).sum() * scale
    opt.zero_grad()
    loss.backward()
    if all(torch.isfinite(p.grad).all() for p in [w]):
        with torch.no_grad():
            w.grad /= scale
        opt.step()
    else:
        scale /= 1e30
print("w", w, "scale", scale)
