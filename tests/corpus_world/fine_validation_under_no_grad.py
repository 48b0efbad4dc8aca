# source: https://github.com/nianticlabs/monodepth2/issues/24
# expect-kind: none
# torch.no_grad() only around the validation pass; training steps keep their graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
depth_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))
opt = torch.optim.Adam(depth_net.parameters(), lr=1e-3)
images, gt = torch.randn(2, 3, 8, 8), torch.rand(2, 1, 8, 8)
for epoch in range(2):
    depth_net.train()
    loss = (depth_net(images) - gt).abs().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    depth_net.eval()
    with torch.no_grad():
        val_loss = (depth_net(images) - gt).abs().mean()
    print(epoch, round(val_loss.item(), 4))
