# source: https://github.com/TRI-ML/packnet-sfm/pull/51 (a loss appended to the outputs list without detach)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +8 B/step peak tensor memory, +13 graph nodes/step held by globals; twin +8 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 1, 3, padding=1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
outputs = []
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    img = torch.randn(2, 3, 16, 16)
    depth = net(img)
    photometric = (depth - img.mean(1, keepdim=True)).abs().mean()
    smooth = depth.diff(dim=-1).abs().mean()
    loss = photometric + 0.1 * smooth
    opt.zero_grad()
    loss.backward()
    opt.step()
    outputs.append({"loss": loss, "smooth": smooth})  # CULPRIT FIX: outputs.append({"loss": loss.detach(), "smooth": smooth.detach()})
print(len(outputs))
