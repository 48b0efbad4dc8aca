# source: https://github.com/pytorch/pytorch/pull/33639
# expect-kind: none
# The negative-slope leaky ReLU out of place, as PyTorch's message asks.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
h = torch.randn(3, 4) @ w
h = F.leaky_relu(h, negative_slope=-0.2)
h.pow(2).sum().backward()
print("grad", round(w.grad.abs().sum().item(), 4))
