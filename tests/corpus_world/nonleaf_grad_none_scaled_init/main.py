# source: https://github.com/pytorch/pytorch/issues/91851
# expect-kind: non-leaf-grad-none
# A from-scratch network whose weights are created with requires_grad=True and
# then scaled in the package; the scaled tensors are not leaves, so the manual
# SGD step finds .grad is None.
import torch

from scratchnet.mlp import init_params, forward

torch.manual_seed(0)
params = init_params(4, 8, 2)
x = torch.randn(5, 4)
y = torch.randn(5, 2)
loss = ((forward(params, x) - y) ** 2).mean()
loss.backward()
with torch.no_grad():
    for p in params:
        p -= 0.1 * p.grad  # <- culprit-alt
