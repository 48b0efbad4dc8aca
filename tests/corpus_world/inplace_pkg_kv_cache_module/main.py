# source: https://github.com/pytorch-tpu/llama/pull/59
# expect-kind: inplace-modified-saved-tensor
# expect-node: BmmBackward0
# Fine-tuning through a decoder package that keeps a preallocated KV cache and
# updates it with index_copy_ at each position.
import torch

from llama.model import CachedAttention

torch.manual_seed(0)
layer = CachedAttention(4, max_len=3)
x = torch.randn(1, 3, 4)
outs = [layer(x[:, pos:pos + 1], pos).pow(2).sum() for pos in range(3)]
loss = torch.stack(outs).sum()
loss.backward()  # <- backward
