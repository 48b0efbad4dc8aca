# Rewritten from banctilrobitaille/torch-vectorized#7 and kornia/kornia#3275: anomaly mode stops training with "returned nan values".
# expect: clean
import torch

torch.autograd.set_detect_anomaly(True, check_nan=True)
omega = torch.tensor([[0.0, 0.0, 0.0], [0.1, 0.2, 0.3]], requires_grad=True)
sq = (omega * omega).sum(dim=1)
small = sq < 1e-8
angle = torch.where(small, torch.zeros_like(sq), torch.sqrt(torch.where(small, 1.0, sq)))
loss = angle.sum()
loss.backward()
print("grad", omega.grad)
