# Rewritten from pytorch/pytorch#52248 and #36923: an inverse-distance weight guarded by torch.where, 1/d at d == 0.
# expect: kind=silent-non-finite-value line=9 op=ReciprocalBackward0 phase=backward sink=grad sink_line=11 sink_step=0
import torch

pos = torch.tensor([0.0, 0.5, 2.0], requires_grad=True)
anchor = torch.tensor([0.0, 0.0, 0.0])
opt = torch.optim.SGD([pos], lr=0.05)
d = (pos - anchor).abs()
weight = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
loss = (weight * torch.tensor([1.0, 2.0, 3.0])).sum()
loss.backward()
opt.step()
print("pos", pos)
