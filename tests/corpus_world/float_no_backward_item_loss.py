# source: https://github.com/swz30/MPRNet/issues/108
# expect-kind: float-has-no-backward
# The stage losses are summed with .item() (to log them), and the training
# step then calls backward on the Python float.
import torch
import torch.nn as nn

torch.manual_seed(0)
stages = nn.ModuleList([nn.Conv2d(3, 3, 3, padding=1) for _ in range(3)])
opt = torch.optim.Adam(stages.parameters(), lr=2e-4)
criterion = nn.L1Loss()
inp = torch.randn(2, 3, 8, 8)
target = torch.randn(2, 3, 8, 8)
restored = [s(inp) for s in stages]
loss = sum(criterion(r, target).item() for r in restored)  # <- culprit
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
