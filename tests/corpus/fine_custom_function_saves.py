# expect-kind: none
# A custom autograd.Function that saves its output with save_for_backward.
import torch


class MySigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = 1.0 / (1.0 + torch.exp(-x))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        return grad_out * out * (1.0 - out)


torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
MySigmoid.apply(x).sum().backward()
print(torch.allclose(x.grad, torch.sigmoid(x) * (1 - torch.sigmoid(x))))
