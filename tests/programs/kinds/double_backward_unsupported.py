import torch
from torch.autograd.function import once_differentiable


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable  # <- culprit
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


x = torch.randn(3, requires_grad=True)
y = Square.apply(x)
(g,) = torch.autograd.grad((y ** 2).sum(), x, create_graph=True)
g.sum().backward()
