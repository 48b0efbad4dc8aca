# source: https://github.com/pytorch/examples/pull/779
# expect-kind: leaf-inplace
# A hand-written SGD step p.add_(p.grad, alpha=-lr) on parameters outside
# torch.no_grad(): each parameter is a leaf that requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
lr = 0.1
loss = model(torch.randn(5, 3)).pow(2).mean()
loss.backward()
for p in model.parameters():
    p.add_(p.grad, alpha=-lr)  # <- culprit
print("done")
