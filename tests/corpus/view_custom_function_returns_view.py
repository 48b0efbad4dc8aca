# expect-kind: view-inplace
# A custom autograd.Function whose forward returns a view of its input; the
# caller then modifies the result in place.
import torch


class Flatten(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.view(-1)

    @staticmethod
    def backward(ctx, grad):
        return grad.view(ctx.shape)


torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
flat = Flatten.apply(x * 1.0)
flat.mul_(2.0)  # <- culprit
flat.sum().backward()
