# source: https://github.com/pytorch/pytorch/issues/30454
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# A custom autograd.Function multiplies its input in place inside forward; the
# input is sigmoid's output, saved for backward.
import torch


class ScaleOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2.0  # <- culprit
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2.0


torch.manual_seed(0)
fc = torch.nn.Linear(5, 3)
h = torch.sigmoid(fc(torch.randn(4, 5)))  # <- saved
logits = ScaleOp.apply(h)
logits.mean().backward()  # <- backward
