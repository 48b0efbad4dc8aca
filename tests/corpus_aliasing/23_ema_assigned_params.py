# From: pytorch/pytorch#196083 (in-process state transfer for EMA/teacher setups) and EMA reports where the EMA was built by assigning the model's parameters (our own program)
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
ema = torch.nn.Linear(4, 2)
ema.weight = model.weight  # the EMA holds the model's own parameters
ema.bias = model.bias
opt = torch.optim.SGD(model.parameters(), lr=0.1)
ref = {k: v.detach().clone() for k, v in model.named_parameters()}  # an independent EMA
x = torch.randn(16, 4)
for step in range(3):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()  # <- culprit
    with torch.no_grad():
        for k, p in model.named_parameters():
            ref[k].mul_(0.9).add_(p, alpha=0.1)
        for pe, p in zip(ema.parameters(), model.parameters()):
            pe.mul_(0.9).add_(p, alpha=0.1)
print("TRUTH changed=%s" % any(not torch.allclose(pe, ref[k]) for k, pe in ema.named_parameters()))
