# source: https://github.com/hosseinshn/GradNorm/issues/10
# expect-kind: none
# GradNorm-style: gradients of each task loss w.r.t. the shared layer's weight
# itself (not a clone), with retain_graph for the second call.
import torch
import torch.nn as nn

torch.manual_seed(0)
shared = nn.Linear(6, 8)
head1, head2 = nn.Linear(8, 1), nn.Linear(8, 1)
x = torch.randn(10, 6)
h = torch.relu(shared(x))
L1 = nn.functional.mse_loss(head1(h), torch.randn(10, 1))
L2 = nn.functional.mse_loss(head2(h), torch.randn(10, 1))
W = shared.weight
G1 = torch.autograd.grad(L1, W, retain_graph=True, create_graph=True)[0].norm()
G2 = torch.autograd.grad(L2, W, retain_graph=True, create_graph=True)[0].norm()
gradnorm_loss = (G1 - G2).abs()
(L1 + L2 + 0.1 * gradnorm_loss).backward()
print("grad", round(W.grad.abs().sum().item(), 4))
