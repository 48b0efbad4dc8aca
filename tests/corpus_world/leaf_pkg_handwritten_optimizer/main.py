# source: https://github.com/pytorch/examples/pull/779
# expect-kind: leaf-inplace
# A word-language-model style script with its own SGD helper in a package: the
# helper updates parameters in place outside torch.no_grad().
import torch
import torch.nn as nn

from utils.optim import sgd_update

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(8, 10))
tokens = torch.tensor([[1, 2], [3, 4]])
loss = nn.functional.cross_entropy(model(tokens), torch.tensor([5, 6]))
loss.backward()
sgd_update(model, lr=0.5)
print("ok")
