# source: https://github.com/nianticlabs/monodepth2/issues/24
# expect-kind: no-grad-fn
# The loss comes from the validation step, which switches grad mode off with
# torch.set_grad_enabled(False); the training loop then calls backward on it.
import torch
import torch.nn as nn

torch.manual_seed(0)
depth_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
opt = torch.optim.Adam(depth_net.parameters(), lr=1e-3)


def val_step(inputs, target):
    depth_net.eval()
    torch.set_grad_enabled(False)  # <- culprit
    pred = depth_net(inputs)
    loss = (pred - target).abs().mean()
    return loss


images = torch.randn(2, 3, 8, 8)
gt = torch.rand(2, 1, 8, 8)
loss = val_step(images, gt)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
