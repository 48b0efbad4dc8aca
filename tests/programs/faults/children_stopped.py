"""Children the program stops itself are not failures: a Pool's workers (its `with` block ends by
Pool.terminate, which sends them SIGTERM), a Process it terminates and a python subprocess it kills.
A child that exits 3 on its own is one. The errors of os.kill and of starting a missing program show
python's traceback, with no frame of tensorscope's."""
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import traceback

import torch


def square(i):
    return float((torch.ones(2) * i).sum())


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        print("pool", pool.map(square, range(4)), flush=True)
    sleeper = ctx.Process(target=time.sleep, args=(60,))
    sleeper.start()
    sleeper.terminate()
    sleeper.join()
    print("terminated", sleeper.exitcode, flush=True)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child.kill()
    print("killed", child.wait(), flush=True)
    failing = ctx.Process(target=sys.exit, args=(3,))
    failing.start()
    failing.join()
    print("failing", failing.exitcode, flush=True)
    for start in (lambda: os.kill(failing.pid, signal.SIGTERM), lambda: subprocess.run(["/nonexistent/program"])):
        try:
            start()  # reaped: no such process; no such file (os.posix_spawn on Python 3.13, else fork_exec)
        except OSError:
            traceback.print_exc()
