"""Where a program's signal handler runs, and whether its exception reaches the program (faults19's method,
benchmarks/RESULTS.md "faults20").

An Adam loop on a 32-64-10 MLP; a thread sends SIGINT to the process every 0.5 ms, SENDS times. The program's
SIGINT handler counts where it ran: the first frame below it that is not tensorscope's ``guard`` (a frame of
tensorscope's, torch's, the program's, or another file's; "in_tensorscope" counts tensorscope's frames and the
standard library's frames that tensorscope's code called), and whether a frame of tensorscope's sits between
that frame and the program's own code (a wrapper that called torch's code: python too runs the handler there). Every EVERY-th call it raises the program's own ``Stop``, caught by a ``try``
around the loop: raised minus caught is the exceptions lost on the way. A call that comes while the handler
itself runs (a storm faster than the handler: under ``explain`` the handler's own lines are recorded) is
counted as "nested" and does not raise, so that a ``Stop`` never replaces another; the handler raises only
while the loop's ``try`` can catch it (a check inside the ``except`` clause would raise outside it, under
python too); each ``Stop`` clears the optimizer's state (one inside Adam's first step leaves it half made).

    python benchmarks/signal_landing.py [SENDS [EVERY]]
    tensorscope run benchmarks/signal_landing.py 8000 7

Prints one JSON line on stdout. Sends coalesce: one handler call is one or more arrivals.
"""
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.nn.functional as F

SENDS = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 7
HERE = os.path.abspath(__file__)
TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
STDLIB = ("<frozen ", os.path.dirname(os.__file__) + os.sep)


class Stop(Exception):
    pass


calls = raised = caught = 0
where: dict = {}
stacks: dict = {}  # raise number -> where it was raised (kept for the lost ones)
nested = depth = armed = 0  # armed: the loop's ``try`` is there to catch a Stop (never in its ``except``)
chain = 0  # calls whose stack had a frame of tensorscope's between the landing and the program's code


def _kind(f) -> str:
    name = os.path.abspath(f.f_code.co_filename)
    if name == HERE:
        return "program"
    if name.startswith(TORCH):
        return "torch"
    if f"{os.sep}tensorscope{os.sep}" in name:
        return f"tensorscope {os.path.basename(name)} {f.f_code.co_name}"
    return f"other {os.path.basename(name)} {f.f_code.co_name}"


def handler(signum, frame):
    global calls, raised, chain, nested, depth, armed
    calls += 1
    if depth:  # a call inside a call of its own (a storm faster than the handler): counted, never raises
        nested += 1
        return
    depth = 1
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name == "guard":
        f = f.f_back
    k = _kind(f) if f is not None else "none"
    where[k] = where.get(k, 0) + 1
    g = f
    while g is not None and g.f_code.co_filename.startswith(STDLIB) and "-packages" not in g.f_code.co_filename:
        g = g.f_back
    if g is not None and g is not f and _kind(g).startswith("tensorscope"):
        where["stdlib, called by tensorscope"] = where.get("stdlib, called by tensorscope", 0) + 1
    g = f
    while g is not None and _kind(g) != "program":
        if _kind(g).startswith("tensorscope"):
            chain += 1
            break
        g = g.f_back
    if not (EVERY and calls % EVERY == 0 and armed):
        depth = 0
        return
    stacks[raised + 1] = _stack(f)
    e = Stop(raised + 1)
    raised += 1
    depth = armed = 0  # no call between this and the raise: no check, no other handler call in between
    raise e


def _stack(f) -> str:
    """The frames from where the handler ran down to the program's (the raise's way back)."""
    out = []
    while f is not None and len(out) < 12:
        k = _kind(f)
        out.append(k if k != "torch" else f"torch {os.path.basename(f.f_code.co_filename)} {f.f_code.co_name}")
        if k == "program":
            break
        f = f.f_back
    return " < ".join(out)


torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
done = threading.Event()


def sender():
    pid = os.getpid()
    for _ in range(SENDS):
        os.kill(pid, signal.SIGINT)
        time.sleep(0.0005)
    done.set()


signal.signal(signal.SIGINT, handler)
threading.Thread(target=sender, daemon=True).start()
steps = 0
pending: list = []
while True:
    try:
        armed = 1
        while not done.is_set():
            if pending:
                for n in pending:
                    stacks.pop(n, None)
                pending.clear()
                opt.state.clear()  # a Stop inside Adam's first step leaves its state half made (python too)
            x = torch.randn(16, 32)
            y = torch.randint(0, 10, (16,))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        armed = 0
        break
    except Stop as e:
        armed = 0
        caught += 1
        pending += e.args  # no call here: a check would run the handler outside the ``try``
signal.signal(signal.SIGINT, signal.SIG_IGN)
for n in pending:
    stacks.pop(n, None)
ts = {k: v for k, v in where.items() if k.startswith("tensorscope") or k == "stdlib, called by tensorscope"}
print(json.dumps({"calls": calls, "nested": nested, "steps": steps, "raised": raised, "caught": caught, "lost": raised - caught,
                  "in_tensorscope": sum(ts.values()), "tensorscope_in_chain": chain,
                  "lost_at": sorted(stacks.values())[:10],
                  "where": dict(sorted(where.items(), key=lambda kv: -kv[1])[:8])}))
