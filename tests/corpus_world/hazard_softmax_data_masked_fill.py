# source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/16
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: SoftmaxBackward0
# Masking attention through .data after the softmax: the write bypasses the
# version counter, so backward silently uses the masked probabilities.
import torch

torch.manual_seed(0)
q = torch.randn(1, 3, 4, requires_grad=True)
k = torch.randn(1, 3, 4)
mask = torch.tensor([[[False, True, True], [False, False, True], [False, False, False]]])
attn = torch.softmax(q @ k.transpose(1, 2), dim=-1)  # <- saved
attn.data.masked_fill_(mask, 0.0)  # <- culprit
out = attn @ torch.randn(1, 3, 4)
out.pow(2).sum().backward()  # <- backward
print("grad", q.grad.flatten()[:4])
