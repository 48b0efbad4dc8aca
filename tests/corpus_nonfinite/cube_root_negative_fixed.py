# Rewritten from pytorch/pytorch#25766: a cube root by pow(x, 1/3) of a value that can be negative.
# expect: clean
import torch

torch.manual_seed(0)
w = torch.tensor([0.8, -0.6, 0.3], requires_grad=True)
x = torch.tensor([2.0, 1.0, 4.0])
opt = torch.optim.SGD([w], lr=0.1)
v = w * x
root = v.sign() * v.abs().pow(1.0 / 3.0)
loss = (root - 1.0).pow(2).mean()
loss.backward()
opt.step()
print("loss", loss.item())
