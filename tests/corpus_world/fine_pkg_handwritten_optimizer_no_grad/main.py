# source: https://github.com/pytorch/examples/pull/779
# expect-kind: none
# The SGD helper in the package does its in-place update under
# torch.no_grad(), as the fix in the report does.
import torch
import torch.nn as nn

from utils.optim import sgd_update

torch.manual_seed(0)
model = nn.Linear(4, 2)
for step in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    model.zero_grad()
    loss.backward()
    sgd_update(model, lr=0.1)
print("ok", round(loss.item(), 4))
