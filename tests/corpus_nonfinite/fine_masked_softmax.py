# Handled on purpose: causal masking with -inf; every row keeps at least its own position, so the softmax is finite.
# expect: clean
import torch

torch.manual_seed(0)
q = torch.randn(4, 8, requires_grad=True)
scores = q @ q.t() / 8 ** 0.5
causal = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
scores = scores.masked_fill(causal, float("-inf"))
attn = torch.softmax(scores, dim=-1)
loss = (attn @ q).pow(2).sum()
loss.backward()
print("loss", round(loss.item(), 4))
