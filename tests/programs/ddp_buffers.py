"""A discriminator with eval-mode BatchNorm, scored once before it is wrapped in DistributedDataParallel.

Building DistributedDataParallel broadcasts rank 0's parameters and buffers into the module in place
(their versions move, on every rank, rank 0 included), so the backward through the score taken before
wrapping finds `bn.running_mean` changed: "one of the variables needed for gradient computation has been
modified by an inplace operation". The forward through the wrapper broadcasts the buffers again
(broadcast_buffers), which on this torch keeps their versions.
Under torchrun (env://), or alone with a free port: python ddp_buffers.py PORT
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4, affine=False)

    def forward(self, x):
        return self.bn(self.body(x))


if __name__ == "__main__":
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
    rank = dist.get_rank()
    torch.manual_seed(rank)
    disc = Discriminator().eval()  # frozen statistics: BatchNorm saves running_mean/var for backward
    real = disc(torch.randn(3, 4)).mean()
    model = DistributedDataParallel(disc)
    fake = model(torch.randn(3, 4)).mean()
    print(f"rank {rank} real {real.item():.4f} fake {fake.item():.4f}", flush=True)
    (fake - real).backward()
    print("not reached")
