"""A SIGALRM timeout interrupts ``os.waitpid`` on a child that sleeps (issue 22, faults20): under python the
handler runs inside the call and its ``TimeoutError`` leaves it at once."""
import os
import signal
import sys
import time

import torch  # noqa: F401  (a training script: tensorscope records it)


def timeout(signum, frame):
    raise TimeoutError(f"waited too long in {frame.f_code.co_name}")


signal.signal(signal.SIGALRM, timeout)
pid = os.fork()
if pid == 0:
    time.sleep(20)
    os._exit(3)
start = time.monotonic()
signal.setitimer(signal.ITIMER_REAL, 0.3)
try:
    os.waitpid(pid, 0)
    print("the child ended first", file=sys.stderr)
except TimeoutError as e:
    print("TimeoutError:", e, time.monotonic() - start < 15)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    print("child killed:", os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
