# expect-kind: device-mismatch
# expect-cpu-only: true
# The input is sent to "cuda" while the model stays on the CPU. On a CPU-only
# build the .to() itself raises "Torch not compiled with CUDA enabled"; on a GPU
# machine the model call would raise the device-mismatch error instead.
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda")
model = nn.Linear(3, 2)
x = torch.randn(4, 3).to(device)  # <- culprit
out = model(x)
out.sum().backward()
