# Rewritten from pytorch/pytorch#108618: where(x > 2, log2(x), 2 * x) gives a NaN gradient at x = 0.
# expect: kind=silent-non-finite-value line=6 op=Log2Backward0 phase=backward sink=grad sink_line=8 sink_step=0
import torch

x1 = torch.tensor([0.0, 2.0, 3.0], requires_grad=True)
y1 = torch.where(x1 > 2, torch.log2(x1), 2 * x1)
z1 = y1.sum()
z1.backward()
print("grad", x1.grad)
