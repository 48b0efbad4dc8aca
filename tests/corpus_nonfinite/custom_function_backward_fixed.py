# Rewritten from facebookresearch/svoice#78 and pytorch/pytorch#22820: a hand-written backward divides by the input.
# expect: clean
import torch


class SafeLog(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log1p(x.abs())

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign() / (1 + x.abs())


x = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
y = SafeLog.apply(x).sum()
y.backward()
print("grad", x.grad)
