"""Unbounded recursion with tensor ops: the depth at which RecursionError hits must be the same,
before the program's own ``import torch`` (where tensorscope's instrumentation goes in when torch
was not imported before the program) and after it, and the traceback of one left uncaught (its last
entries, where the recursion stopped) too."""
import sys

sys.setrecursionlimit(2000)
depth = [0]


def count(n):
    depth[0] = n
    return count(n + 1)


try:
    count(0)
except RecursionError as err:
    print("before import torch: RecursionError", err, "at depth", depth[0], "limit", sys.getrecursionlimit())

import torch  # noqa: E402


def rec(t, n):
    depth[0] = n
    return rec(t + 1, n + 1)


try:
    rec(torch.zeros(2), 0)
except RecursionError as err:
    print("RecursionError", err, "at depth", depth[0])
try:
    count(0)
except RecursionError as err:
    print("after import torch: RecursionError", err, "at depth", depth[0], "limit", sys.getrecursionlimit())


def plain(n):
    return plain(n + 1)


plain(0)  # uncaught: the traceback goes to stderr, the exit status is 1
