"""warnings from user code and from torch; each must appear on stderr exactly as under python."""
import logging
import sys
import warnings

import torch


def deprecated_api():
    warnings.warn("deprecated_api is deprecated", DeprecationWarning, stacklevel=2)


def helper():
    warnings.warn("helper warns (shown once per location)")


warnings.warn("plain user warning")
warnings.warn("module-level stacklevel=2", stacklevel=2)
deprecated_api()
for _ in range(3):
    helper()
warnings.warn(RuntimeWarning("runtime warning instance"))
x = torch.tensor([1.0, 2.0])
y = torch.tensor(x)  # torch's own UserWarning, attributed to this line
a = torch.ones(3, requires_grad=True)
(a * 2).sum().backward()
print("non-leaf .grad", (a * 2).grad)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    warnings.warn("captured")
    torch.tensor(x)
print("caught", [(w.category.__name__, str(w.message)[:40], w.lineno) for w in caught])
logging.warning("logging to stderr %d", 42)
print("stdout after warnings", y.tolist())
print("explicit stderr", file=sys.stderr)
