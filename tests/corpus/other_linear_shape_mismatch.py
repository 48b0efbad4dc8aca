# expect-kind: other
# The feature size changed in the data pipeline but not in the model.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 1))
x = torch.randn(4, 8)
out = model(x)  # <- culprit
out.mean().backward()
