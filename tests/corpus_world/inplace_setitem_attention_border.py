# source: https://github.com/AggMan96/RK-Net/issues/9
# expect-kind: inplace-modified-saved-tensor
# expect-node: ReluBackward0
# Zeroing the border of an attention map produced by relu: the map is relu's
# saved output, written through item assignment.
import torch

torch.manual_seed(0)
conv = torch.nn.Conv2d(1, 1, 3, padding=1)
img = torch.randn(2, 1, 6, 6)
att = torch.relu(conv(img))  # <- saved
att[:, :, :, 0] = 0  # <- culprit
att[:, :, :, -1] = 0
loss = (att * img).mean()
loss.backward()  # <- backward
