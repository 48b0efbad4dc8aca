# Rewritten from pytorch/pytorch#2421 and Lightning-AI/pytorch-lightning#4956: a distance loss with gradient accumulation; a micro-batch of the second step has a pair of equal points, sqrt's gradient at 0 is infinite, and the step comes two micro-batches later.
# expect: kind=silent-non-finite-value line=14 op=SqrtBackward0 phase=backward sink=grad sink_line=16 sink_step=5
import torch

torch.manual_seed(0)
emb = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
batches = [torch.randn(2, 3) for _ in range(8)]
batches[5][1] = batches[5][0]
for step in range(2):
    opt.zero_grad()
    for xb in batches[4 * step:4 * step + 4]:
        z = emb(xb)
        dist = torch.sqrt(((z[0] - z[1]) ** 2).sum())
        loss = (1.0 - dist) ** 2
        loss.backward()
    opt.step()
print("weight", emb.weight)
