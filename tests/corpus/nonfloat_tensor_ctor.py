# expect-kind: non-float-requires-grad
# Integer literals make an int64 tensor, which cannot require grad: the
# learnable per-feature weights should have been written as 1.0, 2.0, 3.0.
import torch

torch.manual_seed(0)
x = torch.rand(4, 3)
weights = torch.tensor([1, 2, 3], requires_grad=True)  # <- culprit
score = (x * weights).sum(dim=1)
loss = score.pow(2).mean()
loss.backward()
print(weights.grad)
