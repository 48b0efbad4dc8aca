# source: https://github.com/pytorch/pytorch/issues/95110
# expect-kind: non-float-requires-grad
# The second output of torch.max is a LongTensor of indices; asking it to
# require gradients fails.
import torch

torch.manual_seed(0)
scores = torch.randn(4, 5, requires_grad=True)
values, indices = torch.max(scores, dim=1)
indices.requires_grad = True  # <- culprit
loss = (values * indices).sum()
loss.backward()
