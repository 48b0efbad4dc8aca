# Twin of 05: the gradient norm read before zero_grad
import torch

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 3)).sum().backward()
last_grad = model.weight.grad.detach().clone()
ref = last_grad.clone()
opt.step()
opt.zero_grad(set_to_none=False)
print("logged grad norm", last_grad.norm().item())
print("TRUTH changed=%s" % (not torch.equal(last_grad, ref)))
