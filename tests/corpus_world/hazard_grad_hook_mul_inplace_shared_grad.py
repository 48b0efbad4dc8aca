# source: https://github.com/meta-pytorch/opacus/issues/9
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# A tensor hook scales its gradient in place instead of returning a new one:
# the sum's backward hands the same gradient tensor to both branches, so the
# other branch silently receives the scaled gradient too.
import torch


def scale_grad(g):
    g.mul_(10)  # <- culprit


x = torch.ones(3, requires_grad=True)
w = torch.tensor([1.0, 2.0, 3.0])
a = x * 1
c = a.exp()
b = a * 2
b.register_hook(scale_grad)
((b + c) * w).sum().backward()  # <- backward
print("grad", x.grad)
