# CUDA utilities and default-device contexts: under --device cpu on a machine without a GPU
# they run as no-ops / on the CPU; checks such as is_available() are left as they are.
import io

import torch

torch.manual_seed(0)
torch.cuda.manual_seed(0)
torch.cuda.manual_seed_all(0)
print("available:", torch.cuda.is_available())
x = torch.randn(3, device="cuda")
torch.cuda.synchronize()
torch.cuda.empty_cache()
with torch.device("cuda"):
    y = torch.zeros(2)
torch.set_default_device("cuda")
z = torch.ones(2)
torch.set_default_device(None)
buf = io.BytesIO()
torch.save({"x": x}, buf)
buf.seek(0)
loaded = torch.load(buf, map_location="cuda")
t = torch.ones(2).type("torch.cuda.FloatTensor")
torch.cuda.synchronize()
print("devices:", x.device, y.device, z.device, loaded["x"].device, t.device)
