import torch


class _Type1(torch.autograd.Function):
    @staticmethod
    def forward(ctx, points, values, n_modes):
        k = torch.arange(n_modes, dtype=points.dtype)
        basis = torch.cos(k.unsqueeze(1) * points.unsqueeze(0))
        ctx.save_for_backward(basis)
        return basis @ values

    @staticmethod
    def backward(ctx, grad_out):
        basis, = ctx.saved_tensors
        return None, basis.t() @ grad_out, None


def type1(points, values, n_modes, use_kernel=True):
    if use_kernel:
        return _Type1.apply(points, values, n_modes)  # <- culprit
    k = torch.arange(n_modes, dtype=points.dtype)
    return torch.cos(k.unsqueeze(1) * points.unsqueeze(0)) @ values
