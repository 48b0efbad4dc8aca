# Twin of 03: previous weights cloned
import torch

torch.manual_seed(0)
model = torch.nn.Linear(3, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.randn(8, 3)
prev = model.weight.detach().clone()
ref = prev.clone()
model(x).sum().backward()
opt.step()
update = model.weight.detach() - prev
print("update norm", update.norm().item())
print("TRUTH changed=%s" % (not torch.equal(prev, ref)))
