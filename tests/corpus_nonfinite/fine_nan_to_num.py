# Handled on purpose: a missing reading is NaN in the data, and nan_to_num replaces it before training.
# expect: clean
import torch

raw = torch.tensor([1.0, float("nan"), 3.0])
x = torch.nan_to_num(raw, nan=0.0)
w = torch.ones(1, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
loss = ((x * w - 1.0) ** 2).mean()
loss.backward()
opt.step()
print("w", w)
