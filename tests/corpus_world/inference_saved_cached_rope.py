# source: https://github.com/roboflow/rf-detr/issues/461
# expect-kind: inference-tensor-saved
# The positional table is built lazily and cached on first use; the first call
# was a prediction under torch.inference_mode(), so training later multiplies
# by a cached inference tensor.
import torch
import torch.nn as nn


class PosEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.scale = nn.Parameter(torch.ones(dim))
        self.cache = None

    def forward(self, x):
        if self.cache is None or self.cache.shape[0] != x.shape[1]:
            pos = torch.arange(x.shape[1]).unsqueeze(1) / 10.0
            self.cache = torch.sin(pos * torch.arange(self.dim))  # <- culprit
        return x + self.cache * self.scale


torch.manual_seed(0)
embed = PosEmbed(6)
with torch.inference_mode():  # <- culprit-alt
    embed(torch.randn(1, 5, 6))
opt = torch.optim.SGD(embed.parameters(), lr=0.1)
out = embed(torch.randn(2, 5, 6))
out.pow(2).mean().backward()
opt.step()
