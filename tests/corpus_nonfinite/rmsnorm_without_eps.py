# Rewritten from reports of RMSNorm written by hand without eps (huggingface/transformers threads on NaN with a
# zero padding embedding): x * rsqrt(mean(x ** 2)) is 0 * inf for an all-zero row.
# expect: kind=silent-non-finite-value line=13 op=rsqrt phase=forward sink=loss sink_line=23 sink_step=0
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True))
        return self.weight * x * inv


torch.manual_seed(0)
emb = torch.nn.Embedding(5, 4, padding_idx=0)
norm = RMSNorm(4)
tokens = torch.tensor([[3, 1, 0, 0]])
h = norm(emb(tokens))
loss = h.pow(2).mean()
loss.backward()
print("loss", loss.item())
