"""Row 7: an uncaught exception whose __str__ raises: python prints <exception str() failed>, exit 1."""
import torch


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no text")


x = torch.ones(2, requires_grad=True)
(x * 3).sum().backward()
print("before", x.grad.tolist(), flush=True)
raise Unprintable()
