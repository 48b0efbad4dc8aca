# Twin of 29: the scale is changed after backward, when the gradient no longer reads it
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale  # kept as an attribute: no version check
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
scale = torch.rand(5)
expected = scale.clone()  # d(x * scale)/dx at forward time
y = Scale.apply(x, scale)
y.sum().backward()
scale.mul_(2)
print("TRUTH changed=%s" % (not torch.allclose(x.grad, expected)))
