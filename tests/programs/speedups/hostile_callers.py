"""The accelerator's two entry points called as no tensorscope code calls them (tests/test_speedups.py).

1. ``log_writes`` whose storage key empties the list of writes it walks (Python code run inside the loop, as a
   tensor's finalizer or another thread could): the loop ends where a Python ``for`` loop over the list ends, and
   the log holds what ``optimizer_steps._log_writes`` (the pure-Python loop) writes.
2. ``LaneWrite`` made for ``int`` (whose ``tp_dict`` is NULL on Python 3.12 and later), then for a step type whose
   slots are another class's member descriptors (offsets that lie outside the type's objects): the slots are read
   by name, as Python reads them.

Before review19's fixes both read freed or foreign memory (a segmentation fault, most runs).
"""
import collections
import sys
import weakref

from tensorscope import _speedups
from tensorscope.instrument import optimizer_steps


class Obj:
    pass


def walk(loop):
    objs = [Obj() for _ in range(40)]
    writes = [(o, "add_", "lib", i, i + 1) for i, o in enumerate(objs)]
    log = collections.OrderedDict()

    def storage_key(t):
        writes.clear()
        return id(t)

    loop(writes, log, storage_key)
    place = {id(o): i for i, o in enumerate(objs)}  # keys by the object's place: each walk makes its own objects
    return [(place.get(k), v) for k, v in log.items()]


def compiled(writes, log, key):
    _speedups.log_writes(writes, log, key, lambda opt: set(), None, (7, True, "code", 0, 3), 100, 100)


def pure(writes, log, key):
    optimizer_steps._storage_key = key
    optimizer_steps._log_writes(writes, log, None, 7, True, "code", 0, 3)


print("log_writes:", walk(compiled) == walk(pure), len(walk(compiled)))


class Big:
    __slots__ = tuple(f"a{i}" for i in range(200)) + ("busy", "index", "writes", "lib")


class Small:
    pass


for name in ("busy", "index", "writes", "lib"):
    setattr(Small, name, Big.__dict__[name])
lanes = {}
# a static builtin type first: on Python 3.12 and later its tp_dict is NULL (its dict is the interpreter's)
_speedups.LaneWrite("add_", print, print, lanes, {}, len, weakref.ref, int)
lane = _speedups.LaneWrite("add_", lambda *a: "op", lambda *a: "fallback", lanes, {int: True}, lambda: 0,
                           weakref.ref, Small)
step = lanes[sys._getframe()] = Small()
try:
    step.busy
except TypeError as e:
    expected = str(e)
for _ in range(3):
    try:
        lane(1)
    except TypeError as e:
        print("LaneWrite:", _speedups.slots_known(), str(e) == expected)
