# Rewritten from PyTorch forum threads on a hand-written normalisation whose std is sqrt(E[x^2] - E[x]^2): for a
# large, nearly constant feature the difference cancels to a small negative number in float32.
# expect: clean
import torch

x = torch.tensor([[3000.3, 0.5], [3000.3, -0.5], [3000.3, 1.5], [3000.4, 0.0]])
scale = torch.ones(2, requires_grad=True)
mean = x.mean(dim=0)
var = x.var(dim=0, unbiased=False)
std = var.sqrt()
y = scale * (x - mean) / (std + 1e-5)
loss = y.pow(2).mean()
loss.backward()
print("loss", loss.item())
