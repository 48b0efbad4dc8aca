# source: https://github.com/pytorch/pytorch/pull/149543
# expect-kind: view-inplace
# A GLU-style gate split with chunk(): sigmoid_ on one chunk writes a view that
# chunk returned together with another view.
import torch

torch.manual_seed(0)
fc = torch.nn.Linear(3, 8)
h = fc(torch.randn(2, 3))
a, b = h.chunk(2, dim=-1)
b.sigmoid_()  # <- culprit
(a * b).sum().backward()
