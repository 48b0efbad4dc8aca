# From: torch.frombuffer docs (the tensor shares the buffer's memory; our own program)
import torch

buf = bytearray(16)
header = torch.frombuffer(buf, dtype=torch.float32)
ref = header.clone()
body = torch.frombuffer(buf, dtype=torch.float32)
body.fill_(2.5)  # <- culprit
print("header", header.tolist())
print("TRUTH changed=%s" % (not torch.equal(header, ref)))
