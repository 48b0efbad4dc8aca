# Twin of 16: the clean input cloned
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
x = torch.randn(3, 4, requires_grad=True)
x_clean = x.detach().clone()
ref = x_clean.clone()
model(x).logsumexp(1).sum().backward()
with torch.no_grad():
    x.add_(0.1 * x.grad.sign())
print("perturbation", (x - x_clean).abs().max().item())
print("TRUTH changed=%s" % (not torch.equal(x_clean, ref)))
