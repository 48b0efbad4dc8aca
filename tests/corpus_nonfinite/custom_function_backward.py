# Rewritten from facebookresearch/svoice#78 and pytorch/pytorch#22820: a hand-written backward divides by the input.
# expect: kind=silent-non-finite-value line=15 op=div phase=backward alt_line=19 sink=grad sink_line=20 sink_step=0
import torch


class SafeLog(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log1p(x.abs())

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign() / (1 + x.abs()) * (x / x)


x = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
y = SafeLog.apply(x).sum()
y.backward()
print("grad", x.grad)
