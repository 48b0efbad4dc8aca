# source: https://github.com/source-separation/tutorial/issues/18
# expect-kind: none
# A manual gradient-descent step wrapped in torch.no_grad(), as the fix in the
# report does: the in-place update of the leaf is allowed there.
import torch

torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
target = torch.tensor([1.0, -2.0, 0.5])
for step in range(5):
    loss = (w - target).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad.zero_()
print("w", w)
