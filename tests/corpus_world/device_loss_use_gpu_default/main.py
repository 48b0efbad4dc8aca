# source: https://github.com/amdegroot/ssd.pytorch/issues/536
# expect-kind: device-mismatch
# expect-cpu-only: true
# The multibox loss in the package defaults to use_gpu=True and moves its
# matched targets with .cuda(), although everything else runs on the CPU.
import torch
import torch.nn as nn

from detection.multibox_loss import MultiBoxLoss

torch.manual_seed(0)
head = nn.Linear(8, 4 * 3)
criterion = MultiBoxLoss(num_classes=3)
feats = torch.randn(2, 8)
targets = torch.randint(0, 3, (2, 4))
loss = criterion(head(feats).view(2, 4, 3), targets)
loss.backward()
