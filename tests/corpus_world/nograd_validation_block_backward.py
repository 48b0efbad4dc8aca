# source: https://github.com/nianticlabs/monodepth2/issues/24
# expect-kind: no-grad-fn
# The loss was moved into the validation step, which runs under torch.no_grad();
# the training loop then calls backward on that loss.
import torch
import torch.nn as nn

torch.manual_seed(0)
depth_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
opt = torch.optim.Adam(depth_net.parameters(), lr=1e-3)


def val_step(inputs, target):
    depth_net.eval()
    with torch.no_grad():  # <- culprit
        pred = depth_net(inputs)  # <- culprit-alt
        loss = (pred - target).abs().mean()
    return loss


images = torch.randn(2, 3, 8, 8)
gt = torch.rand(2, 1, 8, 8)
loss = val_step(images, gt)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
