# expect-kind: backward-twice
# expect-node: MseLossBackward0
# Logging the gradient norm with autograd.grad (which frees the graph) before
# calling loss.backward() for the actual update.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
x = torch.randn(16, 4)
y = torch.randn(16, 1)
pred = model(x)
loss = nn.functional.mse_loss(pred, y)  # <- saved
grads = torch.autograd.grad(loss, list(model.parameters()))  # <- culprit
grad_norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
print("grad norm", grad_norm.item())
loss.backward()  # <- backward
