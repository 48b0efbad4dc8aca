# expect-kind: non-scalar-backward
# backward() on the model output (one value per sample) instead of a scalar loss.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(5, 3)
out = model(x)
out.backward()  # <- culprit <- backward
