# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: SinBackward0
# `w.data = ...` swaps the storage of a tensor that sin() saved; no version bump,
# so backward silently uses the new values (cos(0) = 1 instead of cos(w)).
import torch

w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = torch.sin(w)  # <- saved
w.data = torch.zeros(3)  # <- culprit
y.sum().backward()  # <- backward
print("w.grad =", w.grad)
