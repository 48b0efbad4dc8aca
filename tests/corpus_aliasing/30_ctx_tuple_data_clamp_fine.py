# Twin of 30: the weight is clipped before the forward, so backward reads what the forward used
import torch


class MyLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.inputs = (x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.inputs
        return grad @ w, grad.t() @ x


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(3, 4))
x = torch.randn(2, 4, requires_grad=True)
w.data.clamp_(-0.5, 0.5)
w_then = w.detach().clone()
out = MyLinear.apply(x, w)
out.sum().backward()
expected = torch.ones(2, 3) @ w_then  # the gradient with the weight the forward used
print("TRUTH changed=%s" % (not torch.allclose(x.grad, expected)))
