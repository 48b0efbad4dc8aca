import torch


class _NumpyClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        arr = x.detach().numpy()
        arr.clip(lo, hi, out=arr)  # <- culprit
        return x.detach().clone()

    @staticmethod
    def backward(ctx, g):
        return g, None, None


def numpy_clip(x, lo, hi):
    return _NumpyClip.apply(x, lo, hi)
