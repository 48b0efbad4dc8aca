# expect-kind: numpy-requires-grad
# Converting a model output to numpy for logging while it still requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(2, 2)
out = model(torch.randn(3, 2))
arr = out.numpy()  # <- culprit
print(arr.mean())
