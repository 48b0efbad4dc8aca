"""DDP (one process, gloo, CPU) over a reentrant activation checkpoint with find_unused_parameters=True.

backward raises "Expected to mark a variable ready only once ..." for a parameter of the
checkpointed block. Usage: python ddp_checkpoint_twice.py PORT
"""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = checkpoint(self.block, x, use_reentrant=True)
        return self.head(x)


dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
model = DistributedDataParallel(Net(), find_unused_parameters=True)
x = torch.randn(3, 4, requires_grad=True)
print("forward and backward", flush=True)
model(x).sum().backward()
print("not reached")
