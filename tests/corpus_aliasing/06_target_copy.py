# From: DQN target-network update reports (old target kept as a detached alias; our own program)
import torch

torch.manual_seed(0)
online, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
old_target = target.weight.detach()
ref = old_target.clone()
with torch.no_grad():
    target.weight.copy_(online.weight)  # <- culprit
print("target moved by", (target.weight - old_target).abs().sum().item())
print("TRUTH changed=%s" % (not torch.equal(old_target, ref)))
