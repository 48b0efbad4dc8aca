# source: https://github.com/pytorch/torchtitan/issues/1117
# expect-kind: none
# Activation checkpointing of an MoE block whose router state is updated
# outside the checkpointed function, so the recomputation matches the forward.
import torch
from torch.utils.checkpoint import checkpoint

from moe.layer import MoEBlock

torch.manual_seed(0)
block = MoEBlock(dim=8, n_experts=2)
for step in range(2):
    tokens = torch.randn(16, 8, requires_grad=True)
    out, counts = checkpoint(block, tokens, use_reentrant=False)
    out.pow(2).mean().backward()
    block.update_bias(counts)
print(block.bias.tolist())
