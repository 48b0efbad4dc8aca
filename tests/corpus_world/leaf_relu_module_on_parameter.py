# source: https://github.com/zylo117/Yet-Another-EfficientDet-Pytorch/issues/503
# expect-kind: leaf-inplace
# BiFPN fusion weights passed through an in-place ReLU: the parameter itself is
# the leaf that the in-place op writes.
import torch
import torch.nn as nn

torch.manual_seed(0)
weight = nn.Parameter(torch.ones(2))
weight_relu = nn.ReLU(inplace=True)
w = weight
w = weight_relu(w)  # <- culprit
w = w / (w.sum() + 1e-4)
print(w)
