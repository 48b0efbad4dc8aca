# source: https://github.com/milesial/Pytorch-UNet/issues/291
# expect-kind: other
# The segmentation masks are loaded as raw greyscale values (0..255) instead of
# class indices, so cross_entropy sees a target outside the classes.
import torch
import torch.nn as nn

torch.manual_seed(0)
n_classes = 2
unet = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, n_classes, 1))
img = torch.rand(2, 1, 8, 8)
mask = (torch.rand(2, 8, 8) > 0.5).long()
mask = mask * 255  # <- culprit
criterion = nn.CrossEntropyLoss()
loss = criterion(unet(img), mask)
loss.backward()
