# Rewritten from banctilrobitaille/torch-vectorized#7 and kornia/kornia#3275: anomaly mode stops training with "returned nan values".
# expect: kind=non-finite-value line=9 op=SqrtBackward0 phase=backward sink=none
import torch

torch.autograd.set_detect_anomaly(True, check_nan=True)
omega = torch.tensor([[0.0, 0.0, 0.0], [0.1, 0.2, 0.3]], requires_grad=True)
sq = (omega * omega).sum(dim=1)
small = sq < 1e-8
angle = torch.where(small, torch.zeros_like(sq), torch.sqrt(sq))
loss = angle.sum()
loss.backward()
print("grad", omega.grad)
