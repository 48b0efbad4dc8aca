# source: https://github.com/pytorch/pytorch/issues/6990
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# detach() shares memory AND version counter: zeroing the detached tensor is
# seen by autograd, which refuses sigmoid's changed output.
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.sigmoid()  # <- saved
c = out.detach()
c.zero_()  # <- culprit
out.sum().backward()  # <- backward
