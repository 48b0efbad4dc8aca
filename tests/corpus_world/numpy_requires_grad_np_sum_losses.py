# source: https://github.com/zhuangdizhu/FedGen/issues/1
# expect-kind: numpy-requires-grad
# The server's evaluation weights each user's test loss with np.sum; the losses
# are still tensors attached to the graph.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
users = [nn.Linear(6, 3) for _ in range(3)]
test_samples, test_losses = [], []
for model in users:
    x = torch.randn(5, 6)
    y = torch.randint(0, 3, (5,))
    test_losses.append(nn.functional.cross_entropy(model(x), y))
    test_samples.append(len(y))
glob_loss = 0.0
glob_loss = np.sum([x * y for (x, y) in zip(test_samples, test_losses)]).item() / np.sum(test_samples)  # <- culprit
print(glob_loss)
