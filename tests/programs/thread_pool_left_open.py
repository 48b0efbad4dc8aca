"""A ThreadPoolExecutor never shut down: python's exit tells its workers to stop, then joins them
(torch.compile's inductor leaves such a pool behind after a cold compile)."""
from concurrent.futures import ThreadPoolExecutor

import torch

pool = ThreadPoolExecutor(2)
print(pool.submit(lambda: torch.ones(3).sum().item()).result())
