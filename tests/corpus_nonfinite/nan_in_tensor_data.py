# Rewritten from ciemss/pyciemss#315: a target list parsed from a file holds a NaN for a missing reading.
# expect: kind=silent-non-finite-value line=5 op=data phase=forward sink=loss sink_line=12 sink_step=0
import torch

targets = torch.tensor([0.5, float("nan"), 1.5, 2.0])
inputs = torch.tensor([1.0, 2.0, 3.0, 4.0])
w = torch.zeros(1, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
for step in range(3):
    loss = ((inputs * w - targets) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("w", w)
