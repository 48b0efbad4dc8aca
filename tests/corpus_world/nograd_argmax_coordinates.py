# source: https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4
# expect-kind: no-grad-fn
# Training code adapted from the test script: after the soft decoding, the
# test script's argmax decoding was pasted in before the loss; argmax has no gradient.
import torch
import torch.nn as nn

torch.manual_seed(0)
bins = 8
head = nn.Conv2d(4, 3 * bins, 1)
opt = torch.optim.Adam(head.parameters(), lr=1e-3)
feat = torch.randn(1, 4, 6, 6)
gt_coor = torch.rand(6, 6, 3) * 2 - 1
out = head(feat).view(3, bins, 6, 6)
centers = torch.arange(bins).float().view(1, bins, 1, 1)
coor = (out.softmax(1) * centers).sum(1).permute(1, 2, 0)
coor = torch.stack([torch.argmax(out[i], dim=0) for i in range(3)], dim=2)  # <- culprit
coor = 2.0 * coor.float() / (bins - 1) - 1.0
loss = (coor - gt_coor).abs().mean()
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
