# Rewritten from allenai/allennlp#890 and jadore801120/attention-is-all-you-need-pytorch#5: a padded query whose every key is masked.
# expect: kind=silent-non-finite-value line=11 op=_softmax phase=forward sink=loss sink_line=14 sink_step=0
import torch

torch.manual_seed(0)
q = torch.randn(3, 4, requires_grad=True)
k = torch.randn(3, 4)
scores = q @ k.t()
key_pad = torch.tensor([[False, False, True], [False, True, True], [True, True, True]])
scores = scores.masked_fill(key_pad, float("-inf"))
attn = torch.softmax(scores, dim=-1)
out = attn @ k
loss = out.pow(2).sum()
loss.backward()
print("loss", loss.item())
