# source: https://github.com/facebookresearch/dinov2/issues/472
# expect-kind: inference-tensor-saved
# Backbone features were computed under torch.inference_mode() (as in the
# notebook); training a head on them makes autograd save an inference tensor.
import torch
import torch.nn as nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
images = torch.randn(4, 3, 16, 16)
depths = torch.rand(4, 1)


@torch.inference_mode()  # <- culprit
def extract(x):
    return backbone(x)


feats = extract(images)
pred = head(feats)
loss = nn.functional.mse_loss(pred, depths)
opt.zero_grad()
loss.backward()
opt.step()
