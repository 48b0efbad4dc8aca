# From: cisco-open/flame#330 (a federated-learning trainer keeps `prev_weights = self.weights` before local
# training, where the weights are the model's state_dict(): the delta sent to the server is always zero; our own
# program)
import copy  # noqa: F401 (the twin deep-copies)

import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(6, 2)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.data = [(torch.randn(8, 6), torch.randint(0, 2, (8,))) for _ in range(4)]

    def local_round(self):
        self.prev_weights = copy.deepcopy(self.model.state_dict())
        self.ref = {k: v.clone() for k, v in self.prev_weights.items()}
        for x, y in self.data:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()  # <- culprit
        weights = self.model.state_dict()
        return {k: weights[k] - self.prev_weights[k] for k in weights}


trainer = Trainer()
for rnd in range(2):
    delta = trainer.local_round()
    print("round %d: |delta| = %.4f" % (rnd, sum(d.abs().sum().item() for d in delta.values())))
print("TRUTH changed=%s" % any(not torch.equal(trainer.prev_weights[k], trainer.ref[k]) for k in trainer.ref))
