# From: "a slice of the weights changes during training" (a view of a parameter kept; our own program)
import torch

torch.manual_seed(0)
emb = torch.nn.Embedding(5, 3)
opt = torch.optim.SGD(emb.parameters(), lr=1.0)
row0 = emb.weight[0]
ref = row0.detach().clone()
emb(torch.tensor([0, 1])).sum().backward()
opt.step()  # <- culprit
print("row 0 at start", row0.tolist())
print("TRUTH changed=%s" % (not torch.equal(row0.detach(), ref)))
