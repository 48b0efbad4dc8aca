# From: pyro-ppl/pyro#1049 and pytorch/tutorials#2797: tensors stashed as ctx attributes instead of save_for_backward (our own program)
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
scale.mul_(2)  # <- culprit
y.sum().backward()
print("TRUTH changed=%s" % (not torch.allclose(x.grad, expected)))
