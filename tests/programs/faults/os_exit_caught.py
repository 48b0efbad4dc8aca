"""Row 2: os._exit cannot be caught; no except or finally block runs."""
import os

import torch

x = torch.ones(2, requires_grad=True)
(x * 3).sum().backward()
print("before", x.grad.tolist(), flush=True)
for status in ("x", 2**70):  # not a C int: os._exit raises, as under python
    try:
        os._exit(status)
    except (TypeError, OverflowError) as e:
        print(type(e).__name__, e, flush=True)
try:
    os._exit(4)
except BaseException:
    print("caught", flush=True)
finally:
    print("finally", flush=True)
print("carried on", flush=True)
