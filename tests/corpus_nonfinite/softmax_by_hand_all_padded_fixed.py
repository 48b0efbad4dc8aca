# Rewritten from huggingface/transformers and forum reports of attention written by hand: the key mask is filled
# with -inf and a sequence that is all padding makes a row whose max is -inf, so x - max is -inf - -inf = NaN.
# expect: clean
import torch

torch.manual_seed(0)
q = torch.randn(2, 3, 4, requires_grad=True)
k = torch.randn(2, 3, 4)
v = torch.randn(2, 3, 4)
lengths = torch.tensor([3, 0])
keep = torch.arange(3)[None, :] < lengths[:, None]
scores = (q @ k.transpose(1, 2)) / 2.0
scores = scores.masked_fill(~keep[:, None, :], torch.finfo(scores.dtype).min)
weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
attn = weights / weights.sum(dim=-1, keepdim=True)
out = attn @ v
loss = out.pow(2).mean()
loss.backward()
print("loss", loss.item())
