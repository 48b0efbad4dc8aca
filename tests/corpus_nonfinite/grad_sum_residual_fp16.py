# Rewritten from NVIDIA/apex#318 and deepspeedai/DeepSpeed#1773: a float16 residual block under a loss scale; the hidden state's gradient is the sum of the skip path's and the branch's, each finite, and the sum overflows.
# expect: kind=silent-non-finite-value line=9 op=add phase=backward summed=9,10 sink=grad sink_line=12 sink_step=0
import torch

w = torch.full((4, 4), 0.5, dtype=torch.float16, requires_grad=True)
x = torch.ones(1, 4, dtype=torch.float16)
opt = torch.optim.SGD([w], lr=1e-6)
h = x @ w
branch = torch.relu(h) * 1.5
out = h + branch
loss = out.float().sum() * 40000.0
loss.backward()
opt.step()
print("w", w)
