# expect-kind: no-grad-fn
# "Optimising accuracy directly": argmax returns integer indices, which have no
# gradient, so the resulting loss has no grad_fn.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 3)
x = torch.randn(10, 4)
labels = torch.randint(0, 3, (10,))
preds = model(x).argmax(dim=1)  # <- culprit
loss = 1.0 - (preds == labels).float().mean()
loss.backward()  # <- backward
