"""Facts a program can observe about its own process: its stack, tracing, torch mode stacks, signal
handlers, sys hooks, threads. Under `python prog.py` each has one well-known value."""
import signal
import sys
import threading
import traceback

import torch

# Known and documented differences (README, "Known limits"), so not printed here: the program's
# <module> frame has tensorscope's runner below it (sys._getframe().f_back is not None). The wrapped
# attributes themselves are probed by introspect_wrappers.py.
print("stack depth", len(traceback.extract_stack()))
print("trace/profile", sys.gettrace(), sys.getprofile())
print("excepthook", sys.excepthook is sys.__excepthook__, "displayhook", sys.displayhook is sys.__displayhook__)
print("stdio", sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__, sys.stdin is sys.__stdin__)
print("SIGINT", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print("SIGALRM", signal.getsignal(signal.SIGALRM), "SIGTERM", signal.getsignal(signal.SIGTERM))
print("threads", [t.name for t in threading.enumerate()])
print("sys.path[1:]", sys.path[1:])

from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

print("function modes", len(_get_current_function_mode_stack()))
print("dispatch modes", len(_get_current_dispatch_mode_stack()))
print("torch function enabled", torch._C._is_torch_function_enabled())
print("grad enabled", torch.is_grad_enabled(), "anomaly", torch.is_anomaly_enabled())
print("Tensor.add_", torch.Tensor.add_.__name__, "Tensor.__setitem__", torch.Tensor.__setitem__.__name__)
print("Tensor.backward", torch.Tensor.backward.__module__, torch.Tensor.backward.__qualname__)
print("autograd.backward", torch.autograd.backward.__module__, torch.autograd.grad.__qualname__)
x = torch.ones(2, requires_grad=True)
y = x.sigmoid()
print("saved tensor wrapper", type(y.grad_fn._raw_saved_result).__name__)
print("num threads", torch.get_num_threads() > 0, "default dtype", torch.get_default_dtype())
