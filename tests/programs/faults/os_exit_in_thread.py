"""Row 1: os._exit from a thread ends the process at once with its status; the main thread never prints."""
import os
import threading
import time

import torch

x = torch.ones(3, requires_grad=True)
(x * 2).sum().backward()
print("before", x.grad.tolist(), flush=True)
threading.Thread(target=lambda: os._exit(9)).start()
time.sleep(60)
print("still alive")
