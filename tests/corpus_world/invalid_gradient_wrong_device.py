# source: https://github.com/VITA-Group/FSGS/issues/59
# expect-kind: invalid-gradient
# A custom backward moves its gradient to a fixed device (here the meta device,
# as a stand-in for the wrong GPU) instead of the input's device.
import torch


class Splat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features):
        ctx.shape = features.shape
        return features.sum(dim=1)

    @staticmethod
    def backward(ctx, grad_out):
        grad = grad_out.unsqueeze(1).expand(ctx.shape).clone()
        grad = grad.to("meta")  # <- culprit
        return grad


torch.manual_seed(0)
features = torch.randn(4, 16, 3, requires_grad=True)
colors = Splat.apply(features)  # <- saved
colors.mean().backward()  # <- backward
