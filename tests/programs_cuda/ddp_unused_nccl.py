"""Under torchrun on GPUs (NCCL, one rank per GPU): a DDP model with a submodule forward never calls.

DDP waits for the gradient of `aux`'s parameters; the second forward raises "Expected to have
finished reduction in the prior iteration ...".
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        self.aux = nn.Linear(4, 2)  # never used by forward

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


if __name__ == "__main__":
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = DistributedDataParallel(Net().to(device), device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = model(torch.randn(3, 4, device=device)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
