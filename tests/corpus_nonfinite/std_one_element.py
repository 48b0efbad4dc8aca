# Rewritten from pytorch/pytorch#4320 (comment) and data-apis/array-api#334: the unbiased std over a dimension of size 1.
# expect: kind=silent-non-finite-value line=9 op=std phase=forward sink=loss sink_line=12 sink_step=0
import torch

torch.manual_seed(0)
feats = torch.randn(1, 4, requires_grad=True)
opt = torch.optim.SGD([feats], lr=0.1)
mu = feats.mean(dim=0, keepdim=True)
sigma = feats.std(dim=0, keepdim=True)
z = (feats - mu) / (sigma + 1e-5)
loss = z.pow(2).sum()
loss.backward()
opt.step()
print("loss", loss.item())
