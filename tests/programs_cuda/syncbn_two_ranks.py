"""SyncBatchNorm synchronising across two ranks (both on cuda:0, gloo): its running statistics are
updated by torch.batch_norm_gather_stats_with_counts, whose schema does not mark them as written, so
their versions do not move.

An eval-mode forward saves running_mean/running_var for backward; a training-mode forward through the
same DistributedDataParallel model (the sync path: world size 2) then updates them in place; the backward
of the eval-mode output runs with the changed statistics: no error, wrong gradients.
Under torchrun: torchrun --nproc_per_node=2 syncbn_two_ranks.py
"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
device = torch.device("cuda", 0)  # one GPU: both ranks on it (gloo carries the all_gather)
net = nn.Sequential(nn.Linear(4, 4), nn.SyncBatchNorm(4, affine=False)).to(device)
model = DistributedDataParallel(net, broadcast_buffers=False)
model.eval()
scored = model(torch.randn(8, 4, device=device)).pow(2).mean()  # saves running_mean and running_var
model.train()
model(torch.randn(8, 4, device=device) * 3 + 1).sum()  # the sync path writes the running statistics
scored.backward()
print(f"rank {rank} grad {net[0].weight.grad.abs().sum().item():.4f} "
      f"running_mean {net[1].running_mean.abs().sum().item():.4f}", flush=True)
dist.destroy_process_group()
