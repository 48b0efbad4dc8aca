# source: https://github.com/karpathy/nanoGPT/issues/281
# expect-kind: device-mismatch
# expect-cpu-only: true
# The training script's default device is 'cuda'; on a machine without a CUDA
# build the model's .to(device) fails.
import torch
import torch.nn as nn

device = "cpu"
# defaults copied from the GPU training config
device = "cuda"  # <- culprit
torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 16))
model.to(device)
idx = torch.randint(0, 16, (2, 5), device=device)
logits = model(idx)
loss = nn.functional.cross_entropy(logits.view(-1, 16), idx.view(-1))
loss.backward()
