# source: https://github.com/pytorch-tpu/llama/pull/59
# expect-kind: inplace-modified-saved-tensor
# expect-node: BmmBackward0
# A preallocated KV cache updated with index_copy_ at each position: the
# previous step's attention scores saved the cache, which the next step writes.
import torch

torch.manual_seed(0)
wq = torch.randn(4, 4, requires_grad=True)
wk = torch.randn(4, 4, requires_grad=True)
x = torch.randn(1, 3, 4)
cache_k = torch.zeros(1, 3, 4)
scores = []
for pos in range(2):
    xq, xk = x[:, pos:pos + 1] @ wq, x[:, pos:pos + 1] @ wk
    cache_k.index_copy_(1, torch.tensor([pos]), xk)  # <- culprit
    scores.append(xq @ cache_k.transpose(1, 2))  # <- saved
loss = torch.cat(scores, dim=1).sum()
loss.backward()  # <- backward
