# source: https://github.com/ghimiredhikura/Complex-YOLOv3/issues/8
# expect-kind: float-has-no-backward
# The YOLO loss returns the literal 0.0 when an image has no target box; the
# training loop calls backward on it.
import torch
import torch.nn as nn

torch.manual_seed(0)
head = nn.Conv2d(4, 7, 1)
opt = torch.optim.Adam(head.parameters(), lr=1e-3)


def yolo_loss(pred, targets):
    if targets.numel() == 0:
        return 0.0  # <- culprit
    return nn.functional.mse_loss(pred[..., :targets.shape[-1]].mean((2, 3)), targets)


feats = torch.randn(1, 4, 5, 5)
targets = torch.zeros(0, 7)
loss = yolo_loss(head(feats), targets)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
