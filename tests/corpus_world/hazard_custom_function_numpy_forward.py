# source: https://github.com/pytorch/pytorch/issues/5871
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: ExpBackward0
# A custom autograd.Function normalises its input in place through NumPy in
# forward, without ctx.mark_dirty: exp's saved output changes silently.
import torch


class NumpyClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        arr = x.detach().numpy()
        arr.clip(0.0, 2.0, out=arr)  # <- culprit
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g


torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
e = x.exp()  # <- saved
y = NumpyClip.apply(e)
(y + e).sum().backward()  # <- backward
print("grad", x.grad)
