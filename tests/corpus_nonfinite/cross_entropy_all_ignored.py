# Rewritten from pytorch/pytorch#70348 and #116349: cross_entropy(ignore_index=...) over a batch whose targets are all ignored.
# expect: kind=silent-non-finite-value line=13 op=nll_loss phase=forward sink=loss sink_line=14 sink_step=0
import torch
import torch.nn.functional as F

PAD = -100
torch.manual_seed(0)
model = torch.nn.Linear(8, 5)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
y = torch.full((4,), PAD)  # a batch of padding only: no target counts
logits = model(x)
loss = F.cross_entropy(logits, y, ignore_index=PAD)
loss.backward()
opt.step()
print("loss", loss.item())
