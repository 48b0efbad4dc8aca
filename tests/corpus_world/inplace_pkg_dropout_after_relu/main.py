# source: https://github.com/BierOne/bottom-up-attention-vqa/issues/6
# expect-kind: inplace-modified-saved-tensor
# expect-node: ReluBackward0
# A classifier package beside the script: its head applies
# nn.Dropout(inplace=True) to relu's output, which ReluBackward0 saved.
import torch

from models.classifier import SimpleClassifier

torch.manual_seed(0)
clf = SimpleClassifier(6, 8, 3, dropout=0.5)
logits = clf(torch.randn(4, 6))
loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 1]))
loss.backward()  # <- backward
