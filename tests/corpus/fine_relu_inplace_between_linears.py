# expect-kind: none
# nn.ReLU(inplace=True) between two Linear layers: the first Linear's output is
# not saved by anything, so overwriting it is safe.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
x = torch.randn(8, 4)
y = torch.randn(8, 1)
loss = nn.functional.mse_loss(model(x), y)
loss.backward()
print(model[0].weight.grad.norm())
