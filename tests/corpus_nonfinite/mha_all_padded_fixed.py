# Rewritten from pytorch/pytorch#41508 and pytorch/pytorch#27968: nn.MultiheadAttention with a key_padding_mask that pads every key of one sequence (an empty sequence in the batch).
# expect: clean
import torch

torch.manual_seed(0)
mha = torch.nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
opt = torch.optim.SGD(mha.parameters(), lr=0.01)
x = torch.randn(2, 3, 8)
lengths = torch.tensor([3, 1])  # every sequence keeps a token
pad = torch.arange(3)[None, :] >= lengths[:, None]
out, _ = mha(x, x, x, key_padding_mask=pad)
loss = out.pow(2).mean()
loss.backward()
opt.step()
print("loss", loss.item())
