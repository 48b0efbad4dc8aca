# Rewritten from PyTorch forum threads on an angular loss whose acos turns NaN when the prediction points along the
# target: the dot product of two unit vectors rounds to 1.0000001 in float32.
# expect: kind=silent-non-finite-value line=12 op=acos phase=forward sink=loss sink_line=15 sink_step=0
import torch
import torch.nn.functional as F

pred = torch.tensor([[0.1, 0.2, 0.7], [1.0, 0.0, 0.5]], requires_grad=True)
target = torch.tensor([[0.2, 0.4, 1.4], [0.0, 1.0, 0.0]])
opt = torch.optim.Adam([pred], lr=0.01)
for step in range(2):
    cos = (F.normalize(pred, dim=1) * F.normalize(target, dim=1)).sum(dim=1)
    angle = torch.acos(cos)
    loss = angle.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
