# source: https://github.com/jina-ai/finetuner/issues/435
# expect-kind: no-grad-fn
# freeze=True froze the whole embedding model, the projection head included,
# before the training loop ran.
import torch
import torch.nn as nn

torch.manual_seed(0)
embed = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8))
freeze = True
if freeze:
    embed.requires_grad_(False)  # <- culprit
opt = torch.optim.Adam(embed.parameters(), lr=1e-3)
anchor, positive, negative = torch.randn(3, 6, 12).unbind(0)
loss = nn.functional.triplet_margin_loss(embed(anchor), embed(positive), embed(negative))
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
