# Rewritten from allenai/allennlp#890: a masked log_softmax that adds log(mask), one row's mask all zero.
# expect: clean
import torch

logits = torch.tensor([[0.3, 0.5, 0.2], [0.3, 0.3, 0.3]], requires_grad=True)
mask = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
target = torch.tensor([1, 0])
opt = torch.optim.SGD([logits], lr=0.1)
scores = logits + torch.log(mask + 1e-45)
logp = torch.log_softmax(scores, dim=1)
loss = -logp.gather(1, target[:, None]).mean()
loss.backward()
opt.step()
print("loss", loss.item())
