# source: https://github.com/lucidrains/flamingo-pytorch/issues/10
# expect-kind: inplace-modified-saved-tensor
# expect-node: SoftmaxBackward0
# Zeroing attention weights with masked_fill_ after the softmax that saved them.
import torch

torch.manual_seed(0)
q = torch.randn(2, 3, 4, requires_grad=True)
k = torch.randn(2, 5, 4)
mask = torch.rand(2, 3, 5) > 0.5
attn = (q @ k.transpose(1, 2)).softmax(dim=-1)  # <- saved
attn.masked_fill_(mask, 0.0)  # <- culprit
out = attn @ torch.randn(2, 5, 4)
out.sum().backward()  # <- backward
