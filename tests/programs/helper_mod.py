"""Sibling module imported by pkg_main.py."""

GREETING = "hello from helper_mod"


def scale(t, k):
    return t * k


def whoami():
    import __main__
    return __name__, getattr(__main__, "__name__", None), hasattr(__main__, "MARKER")
