# Rewritten from NVIDIA/apex#358: a hand-written BCE where a sigmoid saturates to exactly 1.0 and log(1 - p) is -inf.
# expect: kind=silent-non-finite-value line=9 op=log phase=forward sink=loss sink_line=11 sink_step=0
import torch

logits = torch.tensor([0.3, 40.0, -2.0], requires_grad=True)
y = torch.tensor([1.0, 0.0, 0.0])
opt = torch.optim.SGD([logits], lr=0.1)
p = torch.sigmoid(logits)
bce = -(y * torch.log(p) + (1 - y) * torch.log(1 - p))
loss = bce.mean()
loss.backward()
opt.step()
print("loss", loss.item())
