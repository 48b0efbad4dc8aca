# source: https://github.com/lucidrains/flamingo-pytorch/issues/10
# expect-kind: none
# A src layout whose attention masks the scores out of place (masked_fill,
# no underscore) before the softmax.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import torch  # noqa: E402

from tinyattn.attention import CrossAttention  # noqa: E402

torch.manual_seed(0)
attn = CrossAttention(4)
mask = torch.rand(2, 3, 5) > 0.5
mask[..., 0] = False
out = attn(torch.randn(2, 3, 4), torch.randn(2, 5, 4), mask)
out.pow(2).mean().backward()
print("grad", attn.to_q.weight.grad.abs().sum().item())
