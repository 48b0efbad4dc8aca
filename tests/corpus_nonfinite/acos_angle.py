# Rewritten from pytorch/pytorch#8069 and #61810: acos of a cosine similarity that reaches exactly 1.
# expect: kind=silent-non-finite-value line=10 op=AcosBackward0 phase=backward sink=grad sink_line=12 sink_step=0
import torch
import torch.nn.functional as F

u = torch.tensor([[1.0, 0.0], [0.6, 0.8]], requires_grad=True)
v = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
opt = torch.optim.SGD([u], lr=0.1)
cos = F.cosine_similarity(u, v, dim=1).clamp(-1.0, 1.0)
angle = torch.acos(cos)
loss = angle.sum()
loss.backward()
opt.step()
print("u", u)
