# Handled on purpose: a GradScaler-style loop on float16 parameters; a step whose gradients overflowed is skipped and the scale halved.
# expect: clean
import torch

w = torch.tensor([1.0, -1.0], dtype=torch.float16, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
scale = 2.0 ** 16
for step in range(5):
    loss = (w.float() ** 2).sum()
    opt.zero_grad()
    (loss * scale).backward()
    if all(torch.isfinite(p.grad).all() for p in [w]):
        with torch.no_grad():
            w.grad /= scale
        opt.step()
    else:
        scale /= 2
print("w", w, "scale", scale)
