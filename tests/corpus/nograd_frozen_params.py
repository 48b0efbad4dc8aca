# expect-kind: no-grad-fn
# Freezing the backbone for fine-tuning, but the loop freezes every parameter
# (the new head included), so nothing in the loss requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
for p in model.parameters():
    p.requires_grad = False  # <- culprit
x = torch.randn(5, 4)
loss = nn.functional.cross_entropy(model(x), torch.tensor([0, 1, 0, 1, 1]))
loss.backward()  # <- backward
