# Twin of 47: the initial weights copied when they are kept (`.numpy().copy()`)
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
emb = nn.Embedding(12, 6)
opt = torch.optim.AdamW(emb.parameters(), lr=0.1)
w0 = emb.weight.detach().cpu().numpy().copy()
reference = emb.weight.detach().clone()
step = 0
while True:
    if step % 2 == 0:
        drift = np.abs(emb.weight.detach().cpu().numpy() - w0).mean()
        print(f"step {step}: drift from init {drift:.6f}")
    if step == 4:
        changed = not np.array_equal(w0, reference.numpy())
        break
    loss = emb(torch.randint(0, 12, (5,))).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
print("TRUTH changed=%s" % changed)
