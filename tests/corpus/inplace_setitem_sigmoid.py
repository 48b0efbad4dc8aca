# expect-kind: inplace-modified-saved-tensor
# expect-alias: probs
# expect-node: SigmoidBackward0
# Masking the first sample's probabilities with item assignment after sigmoid.
import torch

torch.manual_seed(0)
logits = torch.randn(3, 4, requires_grad=True)
target = torch.rand(3, 4)
probs = torch.sigmoid(logits)  # <- saved
probs[0] = 0.0  # <- culprit
loss = ((probs - target) ** 2).mean()
loss.backward()  # <- backward
print(logits.grad)
