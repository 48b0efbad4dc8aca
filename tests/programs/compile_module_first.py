"""A module compiled and called before any backward call (tests/test_forward_tracebacks.py).

tensorscope holds a global forward hook until the first backward call; torch 2.9 and later warn at an
OptimizedModule's call while any global module hook is registered, and dynamo would trace the hook.
"""
import torch

torch.manual_seed(0)
layer = torch.compile(torch.nn.Linear(8, 2, dtype=torch.float64), backend="eager")
print("compiled module", layer(torch.ones(3, 8, dtype=torch.float64)).sum().item())
