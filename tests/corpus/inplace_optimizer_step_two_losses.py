# expect-kind: inplace-modified-saved-tensor
# expect-node: AddmmBackward0
# Two losses on one forward pass, with the optimizer step taken between their
# backward calls: SGD rewrites the second layer's weight, which addmm saved.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(10, 3)
out = model(x)  # <- saved
loss_main = out.pow(2).mean()
loss_aux = out.abs().mean()

opt.zero_grad()
loss_main.backward(retain_graph=True)
opt.step()  # <- culprit
loss_aux.backward()  # <- backward
