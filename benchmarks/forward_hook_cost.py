"""What a global module forward hook costs a forward pass, in process (fwd16, 2026-11-26).

tensorscope holds one global forward hook until the first backward call returns (NOTE [Steps without
backward] in tensorscope/instrument/growth.py); any global hook sends every module call through the slow
path of ``Module._call_impl``. This times gpt_train's GPT (benchmarks/workloads/gpt_train.py) forward under
``no_grad`` in plain torch with: no global hook; a hook that returns None (``always_call=False``, as before
fwd16); the same hook with ``always_call=True`` (fwd16: NOTE [Python's traceback under the global forward
hook]). CPU time (``time.thread_time``) per forward, the minimum over many short chunks, the three
configurations alternated chunk by chunk, so the machine's load moves all three alike. The same for one
call of an ``nn.Identity`` (what the path itself costs a module call).

Usage: python benchmarks/forward_hook_cost.py [chunks] (run from the repository root)
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads"))
from gpt_train import BATCH, CONTEXT, GPT, VOCAB  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(0)
model = GPT()
idx = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1))
x, y = idx[:, :-1], idx[:, 1:]
register = torch.nn.modules.module.register_module_forward_hook
calls = [0]


def hook(module, args, output):
    if output is None:  # tensorscope's hook: the exception path is tested first
        return None
    calls[0] += 1
    return None


identity = torch.nn.Identity()
one = torch.zeros(1)


def chunk(n=2):
    t0 = time.thread_time()
    with torch.no_grad():
        for _ in range(n):
            model(x, y)
    return (time.thread_time() - t0) / n


def identity_chunk(n=2000):
    t0 = time.thread_time()
    for _ in range(n):
        identity(one)
    return (time.thread_time() - t0) / n


def measure(fn, chunks):
    best = {"no hook": float("inf"), "hook": float("inf"), "hook, always_call": float("inf")}
    fn()
    for _ in range(chunks):
        for name in best:
            handle = None
            if name == "hook":
                handle = register(hook)
            elif name == "hook, always_call":
                handle = register(hook, always_call=True)
            try:
                best[name] = min(best[name], fn())
            finally:
                if handle is not None:
                    handle.remove()
    return best


def main():
    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    per_call = measure(identity_chunk, chunks)
    best = measure(chunk, chunks)
    calls[0] = 0
    h = register(hook)
    with torch.no_grad():
        model(x, y)
    h.remove()
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}; {calls[0]} module calls a GPT forward")
    for name, t in per_call.items():
        print(f"{name:>20}: {t * 1e6:8.3f} us an Identity call  {(t - per_call['no hook']) * 1e6:+7.3f} us")
    base = best["no hook"]
    for name, t in best.items():
        print(f"{name:>20}: {t * 1e3:8.3f} ms a GPT forward  {t / base:6.3f}x")


if __name__ == "__main__":
    main()
