# y is a VIEW (reshaped into a column) that matmul saves for backward. Scaling it
# in place through a detach() alias bumps the version counter it shares with the
# view, so backward raises. The write also makes autograd rebuild the view's grad_fn
# as AsStridedBackward0, hence "output 0 of AsStrided" in the message.
# This program ends with that RuntimeError.
import torch

torch.manual_seed(0)
x = torch.tensor([1.0, 1.0, 1.0], requires_grad=True)
y = torch.tensor([2.0, 4.0, 6.0], requires_grad=True).view(-1, 1)   # (3, 1) view
z = torch.matmul(x, y)                       # saves x and y
tmp = y.detach()                             # alias of the saved view
tmp.mul_(2)                                  # y is now [4, 8, 12] at version 1
print("y:", y.flatten().tolist(), "| y._version:", y._version, "| y.requires_grad:", y.requires_grad)
z.backward()                                 # RuntimeError: ... output 0 of AsStrided ...
print("never reached:", x.grad)
