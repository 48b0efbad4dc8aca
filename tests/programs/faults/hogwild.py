"""Row 11, after pytorch/examples' mnist_hogwild: workers train a shared model through
torch.multiprocessing and raise; python prints their tracebacks and exits 0."""
import sys

import torch
import torch.multiprocessing as mp


def train(rank, model):
    for _ in range(3):
        loss = model(torch.ones(4, 2)).sum()
        loss.backward()
    raise RuntimeError(f"worker {rank} failed")


if __name__ == "__main__":
    mp.set_start_method(sys.argv[1] if len(sys.argv) > 1 else "fork", force=True)
    model = torch.nn.Linear(2, 1)
    model.share_memory()
    workers = [mp.Process(target=train, args=(rank, model)) for rank in range(2)]
    for p in workers:
        p.start()
    for p in workers:
        p.join()
    print("exit codes", sorted(p.exitcode for p in workers), flush=True)
