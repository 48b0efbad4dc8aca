"""Unbounded recursion with tensor ops: the depth at which RecursionError hits must be the same,
and the traceback of one left uncaught (its last entries, where the recursion stopped) too."""
import sys

import torch

sys.setrecursionlimit(2000)
depth = [0]


def rec(t, n):
    depth[0] = n
    return rec(t + 1, n + 1)


try:
    rec(torch.zeros(2), 0)
except RecursionError as err:
    print("RecursionError", err, "at depth", depth[0])


def plain(n):
    return plain(n + 1)


plain(0)  # uncaught: the traceback goes to stderr, the exit status is 1
