# source: https://github.com/hosseinshn/GradNorm/issues/10
# expect-kind: unused-input
# GradNorm asks for the gradient of a task loss w.r.t. a clone of the shared
# weight: the clone is a new tensor that the loss never used.
import torch
import torch.nn as nn

torch.manual_seed(0)
shared = nn.Linear(6, 8)
head1, head2 = nn.Linear(8, 1), nn.Linear(8, 1)
x = torch.randn(10, 6)
y1, y2 = torch.randn(10, 1), torch.randn(10, 1)
h = torch.relu(shared(x))
L1 = nn.functional.mse_loss(head1(h), y1)
L2 = nn.functional.mse_loss(head2(h), y2)
param = list(shared.parameters())
W = param[0]
W = W.clone()  # <- culprit
G1R = torch.autograd.grad(L1, W, retain_graph=True, create_graph=True)  # <- backward
G1 = torch.norm(G1R[0], 2)
print(G1)
