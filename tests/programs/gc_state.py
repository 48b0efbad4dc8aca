"""The cyclic collector as the program left it, seen from its atexit handler and a finalizer.

tensorscope switches the collector off while it builds and writes the report (after the program's
main code, before its atexit handlers): it must be on again, or still off when the program had turned
it off (`python gc_state.py off`), with the thresholds as they were.
"""

import atexit
import gc
import sys

import torch

if sys.argv[1:] == ["off"]:
    gc.disable()
gc.set_threshold(500, 7, 9)


class Cycle:
    def __init__(self):
        self.me = self

    def __del__(self):
        print("finalizer: collector enabled", gc.isenabled(), flush=True)


@atexit.register
def at_exit():
    print("atexit: collector enabled", gc.isenabled(), "thresholds", gc.get_threshold(), flush=True)
    Cycle()  # garbage only the collector frees: its finalizer runs at shutdown's collection either way


x = torch.ones(3, requires_grad=True)
(x * 2).sum().backward()
print("grad", x.grad.tolist(), "enabled", gc.isenabled())
