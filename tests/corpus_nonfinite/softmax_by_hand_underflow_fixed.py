# Rewritten from uTensor/uTensor#175 and emadeldeen24/TS-TCC#25: a softmax written by hand, without the max subtracted,
# on a batch whose scores are far below zero (float32 exp near its smallest values).
# expect: clean
import torch

w = torch.tensor([1.0, 1.1, 1.2], requires_grad=True)
opt = torch.optim.SGD([w], lr=0.01)
batches = [torch.tensor(-2.0), torch.tensor(-5.0), torch.tensor(-100.0)]
for step, x in enumerate(batches):
    z = w * x
    e = torch.exp(z - z.max().detach())
    p = e / e.sum()
    loss = -torch.log(p[0])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
