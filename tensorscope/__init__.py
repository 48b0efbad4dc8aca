"""tensorscope: a tensor-semantics inspector for PyTorch.

It runs code under instrumented PyTorch and reports which tensors share storage
and version counters, their autograd state over time, and why a backward call
fails: the line and alias that wrote a saved tensor, the line whose node saved
it, and a fix. From a shell (``tensorscope run prog.py``), from Python
(:func:`inspect`), from pytest (``pytest --tensorscope``) and from IPython or
Jupyter (``%load_ext tensorscope``). Importing it is cheap: torch is imported
only when something is inspected.
"""

from tensorscope.api import Report, inspect  # stdlib-only module: no torch here
from tensorscope.version import __version__

__all__ = ["Report", "inspect", "load_ipython_extension", "__version__"]


def load_ipython_extension(ipython):
    """Register the ``%%tensorscope`` and ``%tensorscope_explain`` magics (``%load_ext tensorscope``).

    Example::

        In [1]: %load_ext tensorscope
        In [2]: %%tensorscope
           ...: y = x.detach(); y.zero_()
    """
    from tensorscope.ipython import load_ipython_extension as load

    load(ipython)
