import torch


class _Type1(torch.autograd.Function):
    @staticmethod
    def forward(points, values, n_modes):
        k = torch.arange(n_modes, dtype=points.dtype)
        basis = torch.cos(k.unsqueeze(1) * points.unsqueeze(0))
        return basis @ values, basis

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, basis = output
        ctx.save_for_backward(basis)
        ctx.save_for_forward(basis)
        ctx.mark_non_differentiable(basis)

    @staticmethod
    def backward(ctx, grad_out, _grad_basis):
        basis, = ctx.saved_tensors
        return None, basis.t() @ grad_out, None

    @staticmethod
    def jvp(ctx, _points_t, values_t, _n_modes_t):
        basis, = ctx.saved_tensors
        return basis @ values_t, None


def type1(points, values, n_modes):
    return _Type1.apply(points, values, n_modes)[0]
