# source: https://github.com/pytorch-tpu/llama/pull/59
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: BmmBackward0
# The KV cache is written through .data to avoid the autograd error: the
# earlier scores' backward then reads the overwritten cache silently.
import torch

torch.manual_seed(0)
q = torch.randn(1, 1, 4, requires_grad=True)
cache = torch.randn(1, 3, 4)
scores = q @ cache.transpose(1, 2)  # <- saved
cache.data[:, 1] = torch.ones(4)  # <- culprit
scores.pow(2).sum().backward()  # <- backward
print("grad", q.grad.flatten())
