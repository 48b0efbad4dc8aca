# source: https://github.com/xxlong0/SparseNeuS/issues/42
# expect-kind: non-scalar-backward
# The colour loss is built with reduction='none' for masking, and the masked
# per-pixel loss is passed to backward() without being reduced.
import torch
import torch.nn as nn

torch.manual_seed(0)
renderer = nn.Linear(6, 3)
opt = torch.optim.Adam(renderer.parameters(), lr=1e-3)
rays = torch.randn(32, 6)
gt_color = torch.rand(32, 3)
mask = (torch.rand(32, 1) > 0.2).float()
color_loss = nn.functional.l1_loss(renderer(rays), gt_color, reduction="none")  # <- culprit-alt
loss = color_loss * mask
opt.zero_grad()
loss.backward()  # <- culprit <- backward
opt.step()
