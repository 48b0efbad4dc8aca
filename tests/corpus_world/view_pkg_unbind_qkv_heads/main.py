# source: https://github.com/pytorch/pytorch/pull/149543
# expect-kind: view-inplace
# A transformer block package splits a fused qkv projection with unbind() and
# scales q in place.
import torch

from blocks.attention import FusedAttention

torch.manual_seed(0)
block = FusedAttention(8)
out = block(torch.randn(2, 5, 8))
out.sum().backward()
