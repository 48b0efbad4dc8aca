# Twin of 06: the old target cloned
import torch

torch.manual_seed(0)
online, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
old_target = target.weight.detach().clone()
ref = old_target.clone()
with torch.no_grad():
    target.weight.copy_(online.weight)
print("target moved by", (target.weight - old_target).abs().sum().item())
print("TRUTH changed=%s" % (not torch.equal(old_target, ref)))
