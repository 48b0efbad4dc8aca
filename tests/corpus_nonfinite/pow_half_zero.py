# Rewritten from pytorch/pytorch#6394 (chain rule through sqrt at 0) and leftthomas/CGD#12 ("PowBackward0 returned nan").
# expect: kind=silent-non-finite-value line=7 op=PowBackward0 phase=backward sink=grad sink_line=9 sink_step=0
import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
centered = x - 1.0
mag = centered.pow(2).pow(0.5)
total = mag.sum()
total.backward()
print("grad", x.grad)
