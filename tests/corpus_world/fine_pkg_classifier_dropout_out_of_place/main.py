# source: https://github.com/BierOne/bottom-up-attention-vqa/issues/6
# expect-kind: none
# The fix from the report, in a package: nn.Dropout(inplace=False) after relu.
import torch

from models.classifier import SimpleClassifier

torch.manual_seed(0)
clf = SimpleClassifier(6, 8, 3, dropout=0.5)
loss = torch.nn.functional.cross_entropy(clf(torch.randn(4, 6)), torch.tensor([0, 1, 2, 1]))
loss.backward()
print("grad", clf.fc1.weight.grad.abs().sum().item())
