# expect-kind: resize-requires-grad
# Growing a trainable embedding matrix in place with resize_() to make room for
# new tokens.
import torch

torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)
new_tokens = 2
w.resize_(4 + new_tokens, 3)  # <- culprit
with torch.no_grad():
    w[4:] = 0.0
print(w.shape)
