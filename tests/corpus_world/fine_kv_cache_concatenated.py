# source: https://github.com/pytorch-tpu/llama/pull/59
# expect-kind: none
# A KV cache grown with torch.cat (a new tensor each step) during training: the
# earlier scores keep the cache they saved.
import torch

torch.manual_seed(0)
wq = torch.randn(4, 4, requires_grad=True)
wk = torch.randn(4, 4, requires_grad=True)
x = torch.randn(1, 3, 4)
cache_k = torch.zeros(1, 0, 4)
scores = []
for pos in range(3):
    xq, xk = x[:, pos:pos + 1] @ wq, x[:, pos:pos + 1] @ wk
    cache_k = torch.cat([cache_k, xk], dim=1)
    scores.append((xq @ cache_k.transpose(1, 2)).sum())
torch.stack(scores).sum().backward()
print("grad", wk.grad.sum().item())
