# Rewritten from pytorch/pytorch#70348 and #116349: cross_entropy(ignore_index=...) over a batch whose targets are all ignored.
# expect: clean
import torch
import torch.nn.functional as F

PAD = -100
torch.manual_seed(0)
model = torch.nn.Linear(8, 5)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
y = torch.full((4,), PAD)  # a batch of padding only: no target counts
logits = model(x)
loss = F.cross_entropy(logits, y, ignore_index=PAD, reduction="sum") / (y != PAD).sum().clamp_min(1)
loss.backward()
opt.step()
print("loss", loss.item())
