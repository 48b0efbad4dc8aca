# From: karpathy/nanoGPT's train.py (at each evaluation `checkpoint = {'model': raw_model.state_dict(), ...}` is
# built and written with torch.save at once; the dict lives on while training changes its tensors, but the
# program only reads it right after building it; our own program)
import os
import tempfile

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
x, y = torch.randn(32, 4), torch.randn(32, 2)
out_dir = tempfile.mkdtemp()
best_val_loss, changed = float("inf"), False
for it in range(9):
    if it % 3 == 0:
        val = F.mse_loss(model(x), y).item()
        if val < best_val_loss and it > 0:
            best_val_loss = val
            checkpoint = {"model": model.state_dict(), "iter_num": it, "best_val_loss": best_val_loss}
            ref = {k: v.clone() for k, v in checkpoint["model"].items()}
            torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
            saved = torch.load(os.path.join(out_dir, "ckpt.pt"))["model"]
            changed |= any(not torch.equal(saved[k], ref[k]) for k in ref)
    optimizer.zero_grad()
    F.mse_loss(model(x), y).backward()
    optimizer.step()
print("TRUTH changed=%s" % changed)
