import torch


class _Rasterize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, means, rotations):
        ctx.save_for_backward(means, rotations)
        return (means.sum(1, keepdim=True) * rotations.norm(dim=1, keepdim=True)).expand(-1, 4)

    @staticmethod
    def backward(ctx, grad_out):
        means, rotations = ctx.saved_tensors
        g = grad_out.sum(1, keepdim=True)
        grad_means = g.expand_as(means) * rotations.norm(dim=1, keepdim=True)
        grad_rot = g * rotations / rotations.norm(dim=1, keepdim=True)
        grad_rot = torch.cat([grad_rot, torch.zeros_like(g)], dim=1)  # <- culprit
        return grad_means, grad_rot


def rasterize(means, rotations):
    return _Rasterize.apply(means, rotations)
