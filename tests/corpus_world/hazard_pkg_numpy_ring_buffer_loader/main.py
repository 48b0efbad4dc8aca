# source: https://github.com/pytorch/pytorch/pull/6597
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# A data package hands out torch.from_numpy views of one reusable NumPy buffer;
# prefetching the next batch before backward overwrites the input that mm
# saved for the weight gradient.
import torch

from data.loader import RingLoader

loader = RingLoader(batch=4, features=3)
w = torch.ones(3, 2, requires_grad=True)
x = loader.next_batch()
y = x @ w  # <- saved
loader.prefetch()
y.sum().backward()  # <- backward
print("grad", w.grad.flatten())
