# Rewritten from jinxixiang/magic_animate_unofficial#6 and avalonstrel/GatedConvolution_pytorch#27: a learning rate too large makes the loss diverge after some steps.
# expect: kind=silent-non-finite-value line=12 op=pow phase=forward sink=loss sink_line=14 sink_step=9
import torch

torch.manual_seed(0)
x = torch.randn(64, 3) * 10
y = x @ torch.tensor([1.0, -2.0, 0.5])
w = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.5)
for step in range(40):
    pred = x @ w
    loss = ((pred - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
