# From: PGD / FGSM reports where the clean input was kept with detach() (our own program)
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x = torch.randn(3, 4, requires_grad=True)
x_clean = x.detach()
ref = x_clean.clone()
model(x).logsumexp(1).sum().backward()
with torch.no_grad():
    x.add_(0.1 * x.grad.sign())  # <- culprit
print("perturbation", (x - x_clean).abs().max().item())
print("TRUTH changed=%s" % (not torch.equal(x_clean, ref)))
