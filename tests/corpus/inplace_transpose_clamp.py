# expect-kind: inplace-modified-saved-tensor
# expect-alias: yt
# expect-node: ExpBackward0
# Clamping a transposed alias (.t()) of an exp output in place.
import torch

torch.manual_seed(0)
x = torch.randn(3, 4, requires_grad=True)
y = x.exp()  # <- saved
yt = y.t()
yt.clamp_(max=5.0)  # <- culprit
loss = (yt @ torch.ones(3)).sum()
loss.backward()  # <- backward
print(x.grad)
