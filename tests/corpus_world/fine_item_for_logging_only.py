# source: https://github.com/swz30/MPRNet/issues/108
# expect-kind: none
# The stage losses are summed as tensors for backward; .item() is used only for
# the running log.
import torch
import torch.nn as nn

torch.manual_seed(0)
stages = nn.ModuleList([nn.Conv2d(3, 3, 3, padding=1) for _ in range(3)])
opt = torch.optim.Adam(stages.parameters(), lr=2e-4)
criterion = nn.L1Loss()
epoch_loss = 0.0
for it in range(2):
    inp, target = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
    loss = sum(criterion(s(inp), target) for s in stages)
    opt.zero_grad()
    loss.backward()
    opt.step()
    epoch_loss += loss.item()
print(round(epoch_loss, 4))
