# source: https://github.com/pytorch/pytorch/issues/7860
# expect-kind: inplace-modified-saved-tensor
# expect-node: MulBackward0
# x.detach().zero_() writes the product x that x * y saved for y's gradient.
import torch

a = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([2.0, 3.0], requires_grad=True)
y = torch.tensor([1.0, 1.0], requires_grad=True)
x = a * b
out = (x * y).sum()  # <- saved
x_detach = x.detach()
x_detach.zero_()  # <- culprit
out.backward()  # <- backward
print(y.grad)
