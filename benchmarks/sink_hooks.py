"""What the non-finite checks at the sinks cost a training step, each hook called alone, in process.

Usage::

    python benchmarks/sink_hooks.py gpt|mlp [ROUNDS]

Builds ``gpt_train``'s model and AdamW (``gpt``) or ``small_mlp``'s MLP and Adam (``mlp``), trains 30 steps under
a recording tracker (growth samples off), then calls the three sink hooks of a plain ``run`` (NOTE [Gradients
checked where a step reads them] in instrument/nonfinite.py) on the last step's tensors: the loss's check
(``before_backward``), the deferred gradients' leaves (``after_backward``) and the parameters' check after the step
(``_post_step``, with the deferred gradients in place as after a backward). Prints each hook's minimum and median
CPU time (``time.thread_time``) over ROUNDS chunks of 50 calls (default 40). Compare two trees by running this file
with each on ``PYTHONPATH``, alternated. Run from the repository root.
"""
import os
import sys
import threading
import time

import torch

from tensorscope.instrument import session

which = sys.argv[1] if len(sys.argv) > 1 else "mlp"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 40
del sys.argv[1:]  # gpt_train.py reads its scale from argv[1]
torch.set_num_threads(1)
if which == "gpt":
    path = os.path.abspath("benchmarks/workloads/gpt_train.py")
    src = open(path).read()
    g = {"__name__": "__main__", "__file__": path}
    exec(compile(src[:src.index("final = train()")], path, "exec"), g)
    model, opt, stream = g["model"], g["opt"], g["stream"]

    def make_loss():
        b = stream[0]
        return model(b[:, :-1], b[:, 1:])
else:
    import torch.nn as nn
    import torch.nn.functional as F
    path = os.path.abspath(__file__)
    torch.manual_seed(0)
    data, labels = torch.randn(16, 32, 32), torch.randint(0, 10, (16, 32))
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def make_loss():
        return F.cross_entropy(model(data[0]), labels[0])

tr = session.new_tracker(path)
tr.growth.enabled = False
with session.active(tr):
    for _ in range(30):
        opt.zero_grad()
        loss = make_loss()
        loss.backward()
        opt.step()
    loss = make_loss()
    loss.backward()
    vw, frame, ident = tr.values, sys._getframe(), threading.get_ident()
    deferred = vw.deferred.get(ident)

    def post_step():
        vw.deferred[ident] = deferred
        vw._post_step(opt, (opt,), {})

    hooks = {"before_backward": lambda: vw.before_backward((loss,), {}, frame),
             "after_backward": lambda: vw.after_backward((loss,), {}, frame),
             "_post_step": post_step}
    res = {k: [] for k in hooks}
    for _ in range(rounds):
        for k, f in hooks.items():
            t = time.thread_time()
            for _ in range(50):
                f()
            res[k].append((time.thread_time() - t) / 50)
    assert vw.sink is None, "a sink was found: the hooks' figures are not those of a finite step"
for k, v in res.items():
    print(f"{which} {k:16s} min {min(v) * 1e6:7.2f} us  median {sorted(v)[len(v) // 2] * 1e6:7.2f} us")
