"""tensorscope: a command-line tensor-semantics inspector for PyTorch.

It runs a program under instrumented PyTorch and reports which tensors share
storage and version counters, their autograd state over time, and why a
backward call fails: the line and alias that wrote a saved tensor, the line
whose node saved it, and a fix.
"""

__version__ = "0.1.0"
