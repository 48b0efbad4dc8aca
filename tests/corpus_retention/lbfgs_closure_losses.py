# source: pytorch/examples time_sequence_prediction trained with LBFGS, the closure's losses kept for a plot (our own program)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, python alone): the leak's `losses` holds 3 graph nodes per closure call; LBFGS's own history (`old_dirs`, `old_stps`) grows by one pair of parameter-sized vectors per iteration up to history_size (100) and no further: len(old_dirs) printed at the end is min(iterations, 100) with or without the fix
import os

import torch

torch.manual_seed(0)
torch.set_num_threads(1)  # small ops: threads only cost here
x = torch.linspace(-2, 2, 8).unsqueeze(1).repeat(1, 8)
y = torch.sin(3 * x[:, :1])
net = torch.nn.Sequential(torch.nn.Linear(8, 2048), torch.nn.Tanh(), torch.nn.Linear(2048, 1))
opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=20)
losses = []


def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(net(x), y)
    loss.backward()
    losses.append(loss)  # CULPRIT FIX: losses.append(loss.item())
    return loss


for step in range(int(os.environ.get("LEAK_STEPS", "4"))):
    opt.step(closure)
print(f"{len(losses)} closure calls, LBFGS history {len(opt.state[next(net.parameters())]['old_dirs'])}")
