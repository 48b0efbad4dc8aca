# source: https://github.com/pytorch/torchtitan/issues/1117
# expect-kind: checkpoint-mismatch
# Activation checkpointing of an MoE block whose router in the package updates
# its capacity bias on every call: the recomputed split sizes differ from the
# ones saved during the forward pass.
import torch
from torch.utils.checkpoint import checkpoint

from moe.layer import MoEBlock

torch.manual_seed(0)
block = MoEBlock(dim=8, n_experts=2)
tokens = torch.randn(16, 8, requires_grad=True)
out = checkpoint(block, tokens, use_reentrant=False)
loss = out.pow(2).mean()
loss.backward()  # <- backward
