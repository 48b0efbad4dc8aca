"""Imports a sibling module, uses __main__, sys.argv, stdin, os.chdir + a relative file, __file__, pickle."""
import os
import pickle
import sys

import helper_mod
import torch

MARKER = 1
print("globals", sorted(k for k in globals() if k.startswith("__")))
print("doc", __doc__.split(",")[0])


class Point:
    def __init__(self, x):
        self.x = x


def main():
    print("argv", sys.argv)
    print("name", __name__, type(__loader__).__name__, __spec__, __package__)
    print("file", os.path.basename(__file__), os.path.isabs(__file__), __file__ == os.path.abspath(sys.argv[0]))
    print("path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
    print("main module", sys.modules["__main__"].__dict__ is globals(), sys.modules["__main__"].__file__ == __file__)
    print(helper_mod.GREETING, helper_mod.whoami(), helper_mod.__name__, os.path.basename(helper_mod.__file__))
    t = helper_mod.scale(torch.arange(4.0), 2.5)
    print("scaled", t.tolist())
    name = input("name? ")
    print("got", repr(name))
    rest = sys.stdin.read()
    print("rest", repr(rest))
    start = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    with open("helper_mod.py") as fh:
        print("relative open", fh.readline().strip())
    print("cwd is program dir", os.getcwd() == os.path.dirname(__file__))
    os.chdir(start)
    data = pickle.dumps(Point(torch.tensor([1.0, 2.0])))
    back = pickle.loads(data)
    print("pickle", type(back).__module__, type(back).__qualname__, back.x.tolist())
    print("qualname", Point.__module__, main.__module__)


if __name__ == "__main__":
    main()
