# Twin of 11: the view read before the step, and dropped
import torch

torch.manual_seed(0)
emb = torch.nn.Embedding(5, 3)
opt = torch.optim.SGD(emb.parameters(), lr=1.0)
row0 = emb.weight[0]
start = row0.tolist()
ref = torch.tensor(start)
emb(torch.tensor([0, 1])).sum().backward()
opt.step()
print("row 0 at start", start)
print("TRUTH changed=%s" % (not torch.equal(torch.tensor(start), ref)))
