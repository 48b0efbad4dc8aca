# Twin of 09: the kept tensor cloned out of the buffer
import torch

buf = bytearray(16)
header = torch.frombuffer(buf, dtype=torch.float32).clone()
ref = header.clone()
body = torch.frombuffer(buf, dtype=torch.float32)
body.fill_(2.5)
print("header", header.tolist())
print("TRUTH changed=%s" % (not torch.equal(header, ref)))
