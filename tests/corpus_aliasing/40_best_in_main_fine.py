# From: pytorch/examples-style scripts that keep `best_state = model.state_dict()` inside main(), a local
# that dies when main() returns (our own program)
import copy

import torch
import torch.nn.functional as F


def train(model, optimizer, data, target):
    for x, y in zip(data.split(4), target.split(4)):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def evaluate(model, data, target):
    with torch.no_grad():
        return F.mse_loss(model(data), target).item()


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data, target = torch.randn(16, 3), torch.randn(16, 1)
    best_loss, min_delta = float("inf"), 1.0
    for epoch in range(3):
        train(model, optimizer, data, target)
        loss = evaluate(model, data, target)
        if best_loss - loss > min_delta:  # improved by more than min_delta
            best_loss = loss
            best_state = copy.deepcopy(model.state_dict())
            ref = {k: v.clone() for k, v in best_state.items()}
    model.load_state_dict(best_state)
    print("TRUTH changed=%s" % any(not torch.equal(best_state[k], ref[k]) for k in ref))


if __name__ == "__main__":
    main()
