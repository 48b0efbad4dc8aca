"""A discriminator with eval-mode BatchNorm, scored once before it is wrapped in DistributedDataParallel.

Building DistributedDataParallel broadcasts rank 0's parameters and buffers into the module in place
(their versions move, on every rank, rank 0 included), so the backward through the score taken before
wrapping finds `bn.running_mean` changed: "one of the variables needed for gradient computation has been
modified by an inplace operation". The forward through the wrapper broadcasts the buffers again
(broadcast_buffers), which on this torch keeps their versions.
With `gan`: the model is wrapped first, then called twice before one backward (a GAN discriminator on
real and fake): each forward broadcasts the buffers into the running_mean the other one saved, which
torch 2.13 allows (it keeps the versions; earlier releases raised the version error here).
Then (still `gan`) a second step whose second call is in training mode: BatchNorm updates the running
statistics the first call saved (no version bump, no error: wrong gradients); DDP's broadcast, which
copied equal values, is not that writer.
With `cuda`: the same on the GPU (nccl), with SyncBatchNorm (in a one-GPU group it runs as BatchNorm).
Under torchrun (env://), or alone with a free port: python ddp_buffers.py [PORT] [gan] [cuda]
"""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Discriminator(nn.Module):
    def __init__(self, sync=False):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.bn = (nn.SyncBatchNorm if sync else nn.BatchNorm1d)(4, affine=False)

    def forward(self, x):
        return self.bn(self.body(x))


if __name__ == "__main__":
    port = next((a for a in sys.argv[1:] if a.isdigit()), None)
    sync = "cuda" in sys.argv[1:]
    backend = "nccl" if sync else "gloo"
    if port is None:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    rank = dist.get_rank()
    if sync:
        torch.set_default_device(f"cuda:{rank}")
    torch.manual_seed(rank)
    if "gan" in sys.argv[1:]:
        model = DistributedDataParallel(Discriminator(sync).eval())
        d_real = model(torch.randn(3, 4)).mean()
        d_fake = model(torch.randn(3, 4)).mean()
        (d_fake - d_real).backward()
        print(f"rank {rank} grad {model.module.body.weight.grad.sum().item():.4f}", flush=True)
        # eval, then training mode, then one backward: BatchNorm's kernel is the writer
        d_real = model(torch.randn(3, 4)).pow(2).mean()
        model.train()
        d_fake = model(torch.randn(3, 4)).pow(2).mean()
        (d_fake + d_real).backward()
        print(f"rank {rank} grad {model.module.body.weight.grad.sum().item():.4f}", flush=True)
        sys.exit(0)
    disc = Discriminator(sync).eval()  # frozen statistics: BatchNorm saves running_mean/var for backward
    real = disc(torch.randn(3, 4)).mean()
    model = DistributedDataParallel(disc)
    fake = model(torch.randn(3, 4)).mean()
    print(f"rank {rank} real {real.item():.4f} fake {fake.item():.4f}", flush=True)
    (fake - real).backward()
    print("not reached")
