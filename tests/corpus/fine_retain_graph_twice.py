# expect-kind: none
# Two backward passes through one graph with retain_graph=True on the first.
import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = torch.sigmoid(x)
loss = y.sum()
loss.backward(retain_graph=True)
first = x.grad.clone()
loss.backward()
print(torch.allclose(x.grad, 2 * first))
