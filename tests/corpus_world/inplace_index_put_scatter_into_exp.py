# source: https://github.com/pytorch/pytorch/issues/9391
# expect-kind: inplace-modified-saved-tensor
# expect-node: ExpBackward0
# index_put_ writes selected rows of exp's output, which ExpBackward0 saved.
import torch

torch.manual_seed(0)
x = torch.randn(4, 3, requires_grad=True)
scores = x.exp()  # <- saved
rows = torch.tensor([0, 2])
scores.index_put_((rows,), torch.zeros(2, 3))  # <- culprit
scores.sum().backward()  # <- backward
