# source: https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795/2
# expect-kind: none
# Two backward passes through a shared intermediate, the first one with
# retain_graph=True.
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
h = (torch.randn(5, 3) @ w).pow(2)
h.mean().backward(retain_graph=True)
h.max().backward()
print("grad", w.grad)
