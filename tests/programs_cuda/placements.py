# A program written for CUDA. Replacing every "cuda" by "cpu" gives the same program
# for the CPU (tests/test_device.py relies on that: keep torch.cuda.* calls out of it).
import torch
import torch.nn as nn

torch.manual_seed(0)
dev = torch.device("cuda:0")
x = torch.zeros(2, 3, device="cuda")                 # factory, device="cuda"
v = x[0]                                             # a view of x
v.add_(1)                                            # write through the view
w = torch.randn(3, 2, device=dev, requires_grad=True)   # torch.device("cuda:0")
h = torch.ones(2, 3).to("cuda")                      # .to("cuda")
g = torch.arange(6.0).view(2, 3).cuda()              # .cuda()
k = torch.full((2, 3), 0.5).to(device=torch.device("cuda"))   # .to(device=torch.device(...))
n = x.new_tensor([[1.0, 2.0, 3.0]], device="cuda")   # new_tensor(..., device=)
e = torch.empty_like(h, device=torch.device("cuda", 0)).fill_(2.0)
model = nn.Linear(3, 2).cuda()                       # nn.Module.cuda()
head = nn.Linear(3, 1).to("cuda")                    # nn.Module.to("cuda")
d = h.detach()
d.mul_(3)                                            # h and d share storage and version
out = head(model(x + h + g + k + n + e) @ w.t()).sum()
out.backward()
print("devices:", x.device, w.device, h.device, g.device, model.weight.device, head.bias.device)
print("versions:", x._version, v._version, h._version, d._version)
print("x shares storage with v:", x.untyped_storage()._cdata == v.untyped_storage()._cdata)
print("grads:", w.grad is not None, model.weight.grad is not None, head.weight.grad is not None)
print("out:", round(out.item(), 4))
