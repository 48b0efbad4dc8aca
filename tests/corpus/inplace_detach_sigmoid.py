# expect-kind: inplace-modified-saved-tensor
# expect-alias: c
# expect-node: SigmoidBackward0
# The classic .detach() trap: the detached tensor shares memory AND the version
# counter with `out`, which sigmoid saved for its backward.
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.sigmoid()  # <- saved
c = out.detach()
c.zero_()  # <- culprit
print("out after zero_:", out)
out.sum().backward()  # <- backward
print(a.grad)
