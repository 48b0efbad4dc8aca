"""The script lives two folders below the package it imports (minGPT's projects/adder/adder.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch

from tinygpt.model import Gate
from tinygpt.trainer import step_before_backward

torch.manual_seed(0)
model = Gate(4)
x = torch.randn(2, 4)
for p in model.parameters():
    p.grad = torch.zeros_like(p)
if sys.argv[1:] == ["optim"]:
    step_before_backward(model, x)
else:
    model(x).sum().backward()
