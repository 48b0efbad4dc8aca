"""Tensor work and backward in several threads, one thread failing, and a DataLoader with 2 workers."""
import gc
import threading
import weakref

import torch
from torch.utils.data import DataLoader, TensorDataset


def work(i, results, refs):
    x = (torch.arange(12, dtype=torch.float64).reshape(3, 4) / (i + 1)).requires_grad_()
    w = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    for _ in range(10):
        y = (x * w).sin().sum()
        y.backward()
    tmp = x.detach() * 2
    refs[i] = weakref.ref(tmp)
    del tmp
    results[i] = (x.grad.tolist(), w.grad.tolist(), x._version, w.grad._version)


def failing():
    # default thread name (Thread-N (failing)) and the excepthook's traceback go to stderr
    a = torch.ones(3, requires_grad=True)
    out = a.sigmoid()
    s = out.sum()
    s.backward()
    s.backward()  # backward twice -> RuntimeError inside the thread


def main():
    results, refs = {}, {}
    threads = [threading.Thread(target=work, args=(i, results, refs)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        print(i, results[i])
    gc.collect()
    print("thread temporaries freed:", [refs[i]() is None for i in range(4)])

    bad = threading.Thread(target=failing)
    bad.start()
    bad.join()
    print("active threads:", threading.active_count())

    ds = TensorDataset(torch.arange(40, dtype=torch.float32).reshape(20, 2), torch.arange(20))
    loader = DataLoader(ds, batch_size=3, num_workers=2, shuffle=False)
    w = torch.tensor([0.5, -0.25], requires_grad=True)
    total = 0.0
    for xb, yb in loader:
        loss = ((xb @ w) - yb.float()).pow(2).mean()
        loss.backward()
        total += loss.item()
        print("batch", xb.shape, yb.tolist(), xb.is_shared())
    print("total %.10f" % total, w.grad.tolist())
    del loader
    batch_ref = weakref.ref(xb)
    del xb, yb, loss
    gc.collect()
    print("last batch freed:", batch_ref() is None)


if __name__ == "__main__":
    main()
