# Rewritten from pytorch/pytorch#2421 and #3264: dividing an embedding by its norm when one embedding is all zeros.
# expect: clean
import torch

emb = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
opt = torch.optim.SGD([emb], lr=0.1)
for step in range(2):
    norm = emb.norm(dim=1, keepdim=True)
    unit = torch.nn.functional.normalize(emb, dim=1, eps=1e-12)
    loss = (unit * torch.tensor([1.0, 0.0])).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
