# expect-kind: no-grad-fn
# Combining per-task losses by building a new tensor from them: torch.tensor()
# copies the values and drops the graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
x = torch.randn(5, 4)
out = model(x)
loss_a = out[:, 0].pow(2).mean()
loss_b = out[:, 1].abs().mean()
total = torch.tensor([loss_a, loss_b]).sum()  # <- culprit
total.backward()  # <- backward
