# source: https://github.com/pytorch/pytorch/issues/90209
# expect-kind: none
# A custom Function that writes its input in place and says so with
# ctx.mark_dirty(), returning the input: autograd rewrites the graph.
import torch


class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = x.relu_()
        ctx.mark_dirty(result)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * (result > 0)


z = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
y = MyRelu.apply(z.clone())
(y * y).sum().backward()
print("grad", z.grad)
