# source: https://github.com/xxlong0/SparseNeuS/issues/42
# expect-kind: none
# The per-pixel loss with reduction='none' is masked and then reduced to a
# scalar before backward.
import torch
import torch.nn as nn

torch.manual_seed(0)
renderer = nn.Linear(6, 3)
opt = torch.optim.Adam(renderer.parameters(), lr=1e-3)
rays, gt_color = torch.randn(32, 6), torch.rand(32, 3)
mask = (torch.rand(32, 1) > 0.2).float()
color_loss = nn.functional.l1_loss(renderer(rays), gt_color, reduction="none")
loss = (color_loss * mask).sum() / (mask.sum() * 3 + 1e-5)
opt.zero_grad()
loss.backward()
opt.step()
print(round(loss.item(), 4))
