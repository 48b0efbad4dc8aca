# expect-kind: overlapping-write
# An accumulator built with expand() has one row of memory shared by all rows;
# accumulating into it in place is refused.
import torch

torch.manual_seed(0)
batch = torch.randn(3, 4)
acc = torch.zeros(4).expand(3, 4)
acc += batch  # <- culprit
print(acc)
