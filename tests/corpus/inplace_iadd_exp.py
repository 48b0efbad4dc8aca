# expect-kind: inplace-modified-saved-tensor
# expect-alias: y
# expect-node: ExpBackward0
# Adding a smoothing constant with `+=` to the output of exp, which exp saved.
import torch


def softplus_like(x):
    y = torch.exp(x)  # <- saved
    y += 1.0  # <- culprit
    return torch.log(y)


torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
out = softplus_like(x).sum()
out.backward()  # <- backward
print(x.grad)
