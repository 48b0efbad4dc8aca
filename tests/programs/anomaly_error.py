"""Anomaly mode with errors: a NaN caught by the program, then an uncaught in-place error.
Anomaly mode prints the forward traceback of the failing node on stderr: it must be identical."""
import torch


def forward(a):
    out = a.sigmoid()
    return out


with torch.autograd.detect_anomaly():
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    y = x / x  # 0/0 -> nan in backward
    try:
        y.sum().backward()
    except RuntimeError as err:
        print("caught:", err)

    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = forward(a)
    out.mul_(2)
    out.sum().backward()
