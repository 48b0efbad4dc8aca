"""The program enables anomaly mode itself; no error happens. Anomaly-mode warnings must be identical."""
import torch

torch.autograd.set_detect_anomaly(True)
print("anomaly enabled", torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
x = torch.tensor([0.5, 1.5, -1.0], dtype=torch.float64, requires_grad=True)
y = (x.exp() * x.sin()).sum()
y.backward()
print("grad", x.grad.tolist())
torch.autograd.set_detect_anomaly(False)
print("anomaly disabled", torch.is_anomaly_enabled())

with torch.autograd.detect_anomaly(check_nan=False):
    z = (x ** 2).sum()
    z.backward()
    print("inside context", torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
print("grad", x.grad.tolist(), torch.is_anomaly_enabled())
