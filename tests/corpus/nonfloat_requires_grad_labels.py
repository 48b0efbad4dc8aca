# expect-kind: non-float-requires-grad
# Turning on requires_grad for integer class labels.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
x = torch.randn(4, 4)
labels = torch.arange(4) % 3
labels.requires_grad_()  # <- culprit
loss = nn.functional.cross_entropy(model(x), labels)
loss.backward()
