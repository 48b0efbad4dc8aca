"""torch.compile with the default inductor backend (slow: needs a C++ compiler)."""
import torch

torch.manual_seed(0)


@torch.compile
def f(x):
    return (x.sin() + x.cos() * 2).sum()


x = torch.randn(16, requires_grad=True)
out = f(x)
out.backward()
print(round(out.item(), 4), [round(v, 4) for v in x.grad.tolist()])
