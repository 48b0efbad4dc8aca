# source: https://github.com/sicara/easy-few-shot-learning/issues/40
# expect-kind: no-grad-fn
# Fine-tuning a prototypical network: the model's forward in the package was
# decorated with @torch.no_grad() for evaluation, so the episode loss has no graph.
import torch
import torch.nn as nn

from fewshot.protonet import PrototypicalNet

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 8))
model = PrototypicalNet(backbone)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
support = torch.randn(6, 10)
support_labels = torch.tensor([0, 0, 1, 1, 2, 2])
query = torch.randn(9, 10)
query_labels = torch.tensor([0, 1, 2] * 3)
model.process_support_set(support, support_labels)
scores = model(query)
loss = nn.functional.cross_entropy(scores, query_labels)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
