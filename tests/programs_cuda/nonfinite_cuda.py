"""A NaN/Inf on the GPU: ``python nonfinite_cuda.py forward|backward [cpu|cuda]``.

forward: a training loop of 40 steps whose keep-mask holds a 0 at step 35, so log(0) makes the loss -inf there
(more steps than the CUDA flags read in one batch). backward: the distance of a point to itself, sqrt at 0,
whose gradient is inf/NaN (SqrtBackward0) while the loss is finite.
"""
import sys

import torch

torch.manual_seed(0)
case = sys.argv[1]
device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 4, device=device)
for step in range(40):
    opt.zero_grad()
    if case == "forward":
        keep = torch.ones(8, 1, device=device)
        if step == 35:
            keep[3] = 0.0  # a sample dropped by setting its weight to 0
        loss = -torch.log(torch.sigmoid(model(x)) * keep).mean()
    else:
        z = model(x)
        diff = z[:, None, :] - z[None, :, :]
        dist = torch.sqrt((diff ** 2).sum(-1))  # 0 on the diagonal: an infinite gradient
        loss = dist.mean()
    loss.backward()
    opt.step()
    if step % 10 == 0 or step >= 35:
        print(step, f"{loss.item():.4f}", bool(torch.isfinite(model.weight.grad).all()))
