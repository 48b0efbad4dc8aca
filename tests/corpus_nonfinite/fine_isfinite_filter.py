# Handled on purpose: readings that are not finite are filtered out with isfinite before the loss.
# expect: clean
import torch

readings = torch.tensor([0.5, float("inf"), 1.5, float("nan"), 2.0])
keep = torch.isfinite(readings)
clean = readings[keep]
w = torch.zeros(1, requires_grad=True)
loss = ((clean - w) ** 2).mean()
loss.backward()
print("grad", w.grad)
