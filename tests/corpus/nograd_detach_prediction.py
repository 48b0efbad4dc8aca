# expect-kind: no-grad-fn
# The prediction is detached before the loss (copied from an eval helper).
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(5, 1)
x = torch.randn(8, 5)
y = torch.randn(8, 1)
pred = model(x).detach()  # <- culprit
loss = nn.functional.mse_loss(pred, y)
loss.backward()  # <- backward
