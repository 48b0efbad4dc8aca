# source: https://github.com/hbb1/2d-gaussian-splatting/issues/43
# expect-kind: invalid-gradient
# A 2D-splatting backward returns scale gradients with 2 columns while the
# scales passed in (from a 3D-splatting checkpoint) have 3.
import torch


class RenderScales(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scales):
        ctx.n = scales.shape[0]
        return scales[:, :2].prod(dim=1)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out.unsqueeze(1).expand(ctx.n, 2).clone()  # <- culprit


torch.manual_seed(0)
scales = torch.rand(6, 3, requires_grad=True)
rendered = RenderScales.apply(scales)  # <- saved
rendered.sum().backward()  # <- backward
