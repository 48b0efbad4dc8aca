# expect-kind: inplace-modified-saved-tensor
# expect-alias: t
# expect-node: SoftmaxBackward0
# A helper that renormalises "in place to save memory" is called on a softmax
# output; softmax saved its result.
import torch


def renormalize_(t, eps=1e-6):
    t.clamp_(min=eps)  # <- culprit
    return t


torch.manual_seed(0)
logits = torch.randn(4, 10, requires_grad=True)
labels = torch.tensor([1, 0, 4, 9])
p = torch.softmax(logits, dim=-1)  # <- saved
p = renormalize_(p)
loss = -torch.log(p[torch.arange(4), labels]).mean()
loss.backward()  # <- backward
print(logits.grad.shape)
