"""Row 11: a subprocess running python that fails, and DataLoader workers (forked) that succeed."""
import subprocess
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

done = subprocess.run([sys.executable, "-c", "import sys; print('child says hi'); sys.exit(3)"],
                      capture_output=True, text=True)
print("subprocess", done.returncode, done.stdout.strip(), flush=True)
# close_fds=False: subprocess starts it with os.posix_spawn on every Python (the one above: 3.13 and later)
spawned = subprocess.run([sys.executable, "-c", "print('spawned')"], close_fds=False, capture_output=True, text=True)
print("posix_spawn", spawned.returncode, spawned.stdout.strip(), flush=True)
loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, num_workers=2)
print("batches", [b[0].tolist() for b in loader], flush=True)
