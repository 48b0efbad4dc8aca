# sigmoid saves its OUTPUT for backward (grad = out * (1 - out)). Zeroing that
# output through a detach() alias bumps the shared version counter, so backward
# detects the change and raises "modified by an inplace operation".
# This program ends with that RuntimeError.
import torch

torch.manual_seed(0)
a = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
out = a.sigmoid()                           # out is saved by SigmoidBackward0 at version 0
alias = out.detach()                        # same storage + same version counter as out
alias.zero_()                               # in-place write: out._version becomes 1
print("out:", out.tolist(), "| out._version:", out._version)
out.sum().backward()                        # RuntimeError: ... output 0 of Sigmoid ...
print("never reached:", a.grad)
