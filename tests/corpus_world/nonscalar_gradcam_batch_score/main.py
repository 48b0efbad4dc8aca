# source: https://github.com/1Konny/gradcam_plus_plus-pytorch/issues/7
# expect-kind: non-scalar-backward
# Grad-CAM from the package on a batch of images: the class score it
# back-propagates has one entry per image.
import torch
import torch.nn as nn

from cam.gradcam import GradCAM

torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))
gradcam = GradCAM(net, net[0])
inputs = torch.randn(3, 3, 8, 8)
mask = gradcam(inputs)
print(mask.shape)
