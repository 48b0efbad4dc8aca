# Rewritten from pytorch/pytorch#2421 and #3264: dividing an embedding by its norm when one embedding is all zeros.
# expect: kind=silent-non-finite-value line=9 op=div phase=forward sink=loss sink_line=12 sink_step=0
import torch

emb = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
opt = torch.optim.SGD([emb], lr=0.1)
for step in range(2):
    norm = emb.norm(dim=1, keepdim=True)
    unit = emb / norm
    loss = (unit * torch.tensor([1.0, 0.0])).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
