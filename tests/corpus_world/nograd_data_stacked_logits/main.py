# source: https://github.com/facebookresearch/inversecooking/issues/8
# expect-kind: no-grad-fn
# The decoder in the package stacks its step logits and returns `.data` of the
# stack, so the loss computed from them is cut from the decoder's weights.
import torch
import torch.nn.functional as F

from recipe.decoder import GreedyDecoder

torch.manual_seed(0)
dec = GreedyDecoder(vocab=7, hidden=12)
opt = torch.optim.Adam(dec.parameters(), lr=1e-3)
features = torch.randn(3, 12)
targets = torch.randint(0, 7, (3, 4))
logits = dec.sample(features, steps=4)
loss = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1))
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
