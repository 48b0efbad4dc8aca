# Rewritten from Lightning-AI/torchmetrics#3488 and keras-team/keras#8524: a log-cosh regression loss written as
# log((exp(d) + exp(-d)) / 2) overflows to inf for a residual of 100 in float32.
# expect: kind=silent-non-finite-value line=10 op=exp phase=forward sink=loss sink_line=12 sink_step=0
import torch

pred = torch.tensor([0.5, 100.0, -2.0], requires_grad=True)
target = torch.tensor([0.0, 0.0, -1.0])
opt = torch.optim.SGD([pred], lr=0.01)
d = pred - target
loss = torch.log((torch.exp(d) + torch.exp(-d)) / 2).mean()
opt.zero_grad()
loss.backward()
opt.step()
print("loss", loss.item())
