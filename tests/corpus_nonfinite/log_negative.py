# Rewritten from summerlvsong/Aggregation-Cross-Entropy#2: a log of a score that can go negative.
# expect: kind=silent-non-finite-value line=10 op=log phase=forward sink=loss sink_line=11 sink_step=0
import torch

torch.manual_seed(0)
w = torch.tensor([0.5, -0.3, 0.8], requires_grad=True)
x = torch.tensor([1.0, 2.0, 0.5])
score = w * x
# a "probability" that was never squashed into (0, 1]
nll = -torch.log(score).mean()
nll.backward()
print("nll", nll.item(), "grad", w.grad)
