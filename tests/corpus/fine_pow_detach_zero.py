# expect-kind: none
# The seed's counter-example: pow saves its INPUT, not its output, so zeroing
# the output through a detached alias does not affect the gradient (x.grad == 2).
import torch

x = torch.tensor(1.0, requires_grad=True)
y = x ** 2
y.detach().zero_()
print(y)
y.backward()
print(x.grad)
