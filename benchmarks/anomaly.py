"""Run a Python program with autograd anomaly detection on (the `anomaly` benchmark mode).

    python benchmarks/anomaly.py PROG.py [ARGS...]

Calls ``torch.autograd.set_detect_anomaly(True)`` and then runs PROG as
``__main__`` with ``runpy.run_path``, with ``sys.argv`` and ``sys.path[0]`` set
as ``python PROG.py ARGS...`` would set them.  This is PyTorch's own built-in
debugging aid, and the bar tensorscope's overhead is compared against.
"""
import os
import runpy
import sys


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python benchmarks/anomaly.py PROG.py [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    prog = sys.argv[1]
    import torch

    torch.autograd.set_detect_anomaly(True)
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(prog))
    runpy.run_path(prog, run_name="__main__")


if __name__ == "__main__":
    main()
