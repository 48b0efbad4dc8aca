# Rewritten from motional/nuplan-devkit#91: float16 training where a squared error overflows.
# expect: kind=silent-non-finite-value line=10 op=pow phase=forward sink=loss sink_line=12 sink_step=0
import torch

w = torch.tensor([300.0, 2.0], dtype=torch.float16, requires_grad=True)
x = torch.tensor([1.0, 1.0], dtype=torch.float16)
opt = torch.optim.SGD([w], lr=0.001)
pred = w * x
err = pred - torch.tensor([0.0, 1.0], dtype=torch.float16)
sq = err ** 2
loss = sq.sum()
loss.backward()
opt.step()
print("loss", loss.item())
