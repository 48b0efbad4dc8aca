# expect-kind: no-grad-fn
# The forward pass was left inside a torch.no_grad() block copied from eval code.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(6, 4)
labels = torch.tensor([0, 1, 2, 0, 1, 2])
with torch.no_grad():  # <- culprit
    logits = model(x)  # <- culprit-alt
loss = nn.functional.cross_entropy(logits, labels)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
