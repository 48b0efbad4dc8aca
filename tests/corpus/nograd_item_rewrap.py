# expect-kind: no-grad-fn
# The loss is turned into a Python float with .item() and then back into a tensor.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(4, 3)
loss = model(x).pow(2).mean()
value = loss.item()  # <- culprit
scaled = torch.tensor(value) * 0.5  # <- culprit-alt
scaled.backward()  # <- backward
