# source: https://github.com/r9y9/tacotron_pytorch/issues/16
# expect-kind: none
# Masking alignment energies through .data BEFORE the softmax: bmm did not save
# its output, so nothing waiting for backward is changed.
import torch

torch.manual_seed(0)
query = torch.randn(2, 1, 4, requires_grad=True)
memory = torch.randn(2, 5, 4)
mask = torch.tensor([[False] * 3 + [True] * 2, [False] * 5]).unsqueeze(1)
alignment = torch.bmm(query, memory.transpose(1, 2))
alignment.data.masked_fill_(mask, -float("inf"))
weights = torch.softmax(alignment, dim=-1)
context = torch.bmm(weights, memory)
context.sum().backward()
print("grad", query.grad.flatten()[:4])
