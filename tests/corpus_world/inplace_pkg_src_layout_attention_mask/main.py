# source: https://github.com/lucidrains/flamingo-pytorch/issues/10
# expect-kind: inplace-modified-saved-tensor
# expect-node: SoftmaxBackward0
# A src layout: main.py puts src/ on sys.path and imports tinyattn, whose
# attention zeroes masked weights with masked_fill_ after the softmax.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import torch  # noqa: E402

from tinyattn.attention import CrossAttention  # noqa: E402

torch.manual_seed(0)
attn = CrossAttention(4)
x = torch.randn(2, 3, 4)
media = torch.randn(2, 5, 4)
mask = torch.rand(2, 3, 5) > 0.5
out = attn(x, media, mask)
out.pow(2).mean().backward()  # <- backward
