# source: https://github.com/swz30/MPRNet/issues/108
# expect-kind: float-has-no-backward
# The summed stage loss is turned into a Python float with .item() (for the
# logger), and the training step then calls backward on the float.
import torch
import torch.nn as nn

torch.manual_seed(0)
stages = nn.ModuleList([nn.Conv2d(3, 3, 3, padding=1) for _ in range(3)])
opt = torch.optim.Adam(stages.parameters(), lr=2e-4)
criterion = nn.L1Loss()
inp = torch.randn(2, 3, 8, 8)
target = torch.randn(2, 3, 8, 8)
restored = [s(inp) for s in stages]
loss = sum(criterion(r, target) for r in restored)
loss = loss.item()  # <- culprit
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
