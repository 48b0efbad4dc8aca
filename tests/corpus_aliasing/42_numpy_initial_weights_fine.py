# Twin of 42: the initial weights copied when they are kept
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(4, 2)
opt = torch.optim.SGD(layer.parameters(), lr=0.5)
initial = layer.weight.detach().numpy().copy()
reference = layer.weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    layer(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
print("largest change:", float(np.abs(layer.weight.detach().numpy() - initial).max()))
print("TRUTH changed=%s" % (not np.array_equal(initial, reference.numpy())))
