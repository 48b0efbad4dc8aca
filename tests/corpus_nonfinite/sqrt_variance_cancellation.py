# Rewritten from PyTorch forum threads on a hand-written normalisation whose std is sqrt(E[x^2] - E[x]^2): for a
# large, nearly constant feature the difference cancels to a small negative number in float32.
# expect: kind=silent-non-finite-value line=10 op=sqrt phase=forward sink=loss sink_line=13 sink_step=0
import torch

x = torch.tensor([[3000.3, 0.5], [3000.3, -0.5], [3000.3, 1.5], [3000.4, 0.0]])
scale = torch.ones(2, requires_grad=True)
mean = x.mean(dim=0)
var = (x * x).mean(dim=0) - mean * mean
std = var.sqrt()
y = scale * (x - mean) / (std + 1e-5)
loss = y.pow(2).mean()
loss.backward()
print("loss", loss.item())
