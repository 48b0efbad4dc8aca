# source: https://github.com/mrdbourke/pytorch-deep-learning/issues/83
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: SigmoidBackward0
# .numpy() of a detached output shares its memory; clipping the array in NumPy
# changes sigmoid's saved output without any version bump.
import torch

torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
p = torch.sigmoid(x)  # <- saved
arr = p.detach().numpy()
arr[arr > 0.5] = 0.5  # <- culprit
p.sum().backward()  # <- backward
print("grad", x.grad)
