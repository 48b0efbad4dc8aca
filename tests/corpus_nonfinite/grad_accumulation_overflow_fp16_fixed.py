# Rewritten from fastai/fastai#3069 and mindspore-lab/mindcv#609: gradient accumulation over float16 micro-batches; each micro-batch's gradient is finite, their running sum in .grad passes 65504 at the third.
# expect: clean
import torch

w = torch.full((4,), 0.5, dtype=torch.float16, requires_grad=True)
opt = torch.optim.SGD([w], lr=1e-6)
data = torch.ones(4, 4, dtype=torch.float16)
scale = 24576.0
for step in range(2):
    opt.zero_grad()
    for micro in range(4):
        loss = (data[micro] * w).float().sum() * scale / 4
        loss.backward()
    opt.step()
print("w", w)
