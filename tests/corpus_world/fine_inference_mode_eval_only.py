# source: https://github.com/facebookresearch/dinov2/issues/472
# expect-kind: none
# inference_mode is used only for the evaluation pass; the trainable head sees
# features computed under no_grad (normal tensors), so autograd may save them.
import torch
import torch.nn as nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
images, depths = torch.randn(4, 3, 16, 16), torch.rand(4, 1)
with torch.no_grad():
    feats = backbone(images)
loss = nn.functional.mse_loss(head(feats), depths)
opt.zero_grad()
loss.backward()
opt.step()
with torch.inference_mode():
    pred = head(backbone(images))
print(pred.shape, pred.is_inference())
