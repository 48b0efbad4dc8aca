"""Prints 10 MB on stdout (plus unicode, a raw buffer write, stderr lines, no final newline)."""
import sys

import torch

t = torch.arange(8, dtype=torch.float32)
line = "x" * 63
for i in range(160_000):
    if i % 40_000 == 0:
        t.mul_(2)
        print("checkpoint", i, t.tolist(), file=sys.stderr)
    print(line)
print("unicode: é ü ∑ 🙂")
sys.stdout.buffer.write(b"raw buffer write\n")
print("after raw", t._version)
sys.stdout.write("no final newline")
