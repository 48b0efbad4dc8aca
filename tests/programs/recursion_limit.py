"""Unbounded recursion with tensor ops: the depth at which RecursionError hits must be the same."""
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
