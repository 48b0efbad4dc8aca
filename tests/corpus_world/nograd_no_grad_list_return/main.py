# source: https://github.com/davidmascharka/tbd-nets/issues/8
# expect-kind: no-grad-fn
# The per-module losses come back from the package in a list; the helper that
# computes them is decorated with torch.no_grad() (copied from the eval code).
import torch

from vqa.model import TinyModuleNet
from vqa.losses import module_losses

torch.manual_seed(0)
net = TinyModuleNet()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
feats = torch.randn(4, 6)
answers = torch.tensor([0, 2, 1, 2])
for step in range(2):
    losses = module_losses(net, feats, answers)
    loss = losses[0]
    opt.zero_grad()
    loss.backward()  # <- backward
    opt.step()
    print(step, loss.item())
