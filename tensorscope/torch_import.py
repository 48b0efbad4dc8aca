"""Installing the instrumentation when the program's own ``import torch`` completes.

NOTE [Instrumenting at the program's import of torch]
``tensorscope run/explain prog.py`` does not import torch for the program: under python, a
program that has not imported torch yet does not have it in ``sys.modules`` (einops and other
libraries pick their backends from there), one that never imports it does not pay its import
(seconds, ~300 MB), and a driver that compiles a long script before its own ``import torch``
peaks at the larger of the two, not at their sum (benchmarks/RESULTS.md, "defer16"). So when
torch is not imported when the program starts, tensorscope puts one finder first on
``sys.meta_path`` that answers nothing but the top-level name ``torch``; when the import system
asks it for ``torch`` (``import torch``, ``from torch import nn``, ``import torch.nn.functional``,
``importlib.import_module``, a library's import of it, in any thread, at any time), it:
- asks the finders after it for torch's spec, as the import system would have;
- gives that spec a subclass of its own class with one property, ``_initializing``. The import
  system (``importlib._bootstrap._load_unlocked``, the same on 3.10 to 3.13) sets
  ``spec._initializing = True`` before it executes ``torch/__init__.py`` and ``False`` in a
  ``finally`` once it has, and the module is in ``sys.modules`` (failure: it was removed). The
  setter for True takes the finder off ``sys.meta_path`` (torch's import has begun: it is watched
  once) and calls ``on_begin``; the setter for False puts the spec's own class back and, when the
  import succeeded, calls ``on_import``: the instrumentation is installed there, inside the
  program's import statement, before control returns to it.
It answers only the import system (its caller is ``_find_spec`` called by
``_bootstrap._find_and_load_unlocked``, the same code object on 3.10 to 3.13). Anyone else who asks
sys.meta_path for torch's spec gets the other finders' answer, as under python:
``importlib.util.find_spec("torch")`` (transformers, accelerate and lightning check that torch is
installed this way before importing it) used to take the one watched spec, which was never loaded:
the program's own import of torch then went unwatched (the report said "the program never imported
torch") and ``--timeout``, paused by ``on_begin``, never fired (tests/test_torch_import.py).
What the program can see of it: the finder on ``sys.meta_path`` before its import of torch (a
program that never imports torch keeps it; one Python call per import of a module not yet
imported, ~0.1 us); ``type(torch.__spec__)`` while torch's own ``__init__`` runs. Not: the
loader (``torch.__loader__``, ``__spec__.loader`` are the finders' own), ``builtins.__import__``,
a frame in any traceback (the setter returns before the import's exception propagates further,
and a failing import's traceback is the import system's, trimmed as under python), nor the spec's
class afterwards. Measured against the candidates (benchmarks/RESULTS.md, "defer16"): a loader
wrapping ``exec_module`` is one more frame in every traceback of torch's import and between
importlib's frames, which then are no longer trimmed from a failing import's traceback (the
interpreter trims only runs of importlib frames); a ``builtins.__import__`` wrapper is seen by
every import statement and by ``builtins.__import__``; an audit hook hears the import's start
only and cannot be removed.

An import that fails (``ImportError`` caught by the program, a broken install) leaves nothing
installed and the finder back first on ``sys.meta_path``, so a retry is watched again, as python
would retry it. Measured (tests/test_torch_import.py, torch's ``from torch._C import *`` halted once by
``sys.modules["torch._C"] = None``, then retried): the retry imports torch and is recorded on 3.10 x 2.2.2,
3.11 x 2.13.0 and 3.12 x 2.9.1; torch 2.15.0 refuses any second import ("`torch` can only be initialized
once per process"), and the report says the import failed. A failure later in torch's ``__init__`` (its C
extension loaded) leaves a torch that python's retry cannot import either (NameError ``_C`` on 2.2.2; on
2.13.0 a half-initialized module whose first use raises AttributeError): the same output as under python.
"""

from __future__ import annotations

import sys
import threading

NAME = "torch"
#: the report's note (and the text report's verdict) for a program that never imported torch
NEVER_IMPORTED_TORCH = "the program never imported torch: nothing to record"
IMPORT_FAILED = "the program's import of torch failed: nothing to record"
#: torch in sys.modules at the end, its import never watched: NOTE [torch loaded without an import]
UNWATCHED = ("torch was loaded in a way tensorscope does not watch (not by an import: importlib's module_from_spec "
             "and exec_module): nothing was recorded")
MISSED = ("torch's import could not be watched (its module spec is of a kind tensorscope cannot follow): nothing "
          "was recorded")
NOT_RECORDED = (UNWATCHED, MISSED)

# NOTE [torch loaded without an import]
# The watch hears the import system only. A program (or a plugin loader) can also run torch's
# ``__init__.py`` itself: ``spec = importlib.util.find_spec("torch")`` or ``spec_from_file_location``,
# ``module_from_spec(spec)``, ``sys.modules["torch"] = module``, ``spec.loader.exec_module(module)``.
# Nothing asks the finders for the name ``torch`` then (torch's own imports ask for ``torch._C`` and
# the like, with ``torch`` already in sys.modules), so nothing is installed and nothing recorded:
# measured, the version-counter failure of tests/test_torch_import.py's program loaded that way was
# reported as "the program ended with RuntimeError; 0 backward calls", and under "the program never
# imported torch". The report now says so instead (``UNWATCHED``, and the verdict's "not recorded"),
# never "clean". The two other ways of loading torch again are python's own errors, and the same under
# tensorscope: ``importlib.import_module("torch")`` after the program removed torch's modules from
# sys.modules (SystemError from torch/__init__.py: its C extension cannot be loaded twice), and
# ``importlib.reload(torch)`` (RuntimeError: "Only a single TORCH_LIBRARY can be used to register the
# namespace ...") (torch 2.13.0; the first import was watched and recorded).


class TorchImportWatch:
    """A ``sys.meta_path`` finder that calls ``on_import(module)`` once the program's import of torch
    completes (see NOTE [Instrumenting at the program's import of torch])."""

    def __init__(self, on_import, on_begin=None):
        self._on_import = on_import  # on_import(module), or on_import(None) when the import failed
        self._on_begin = on_begin  # on_begin(): torch's import begins (its spec is found)
        self._lock = threading.Lock()
        self.missed = False  # the spec could not be watched: the import ran without instrumentation
        self.failed = False  # an import of torch failed (its exception went to the program)

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def find_spec(self, name, path=None, target=None):
        if name != NAME or not _asked_by_import(sys._getframe(1)):
            return None
        with self._lock:  # two threads importing torch at once: one watch
            if self not in sys.meta_path:
                return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None:
            return None  # python's ModuleNotFoundError follows; a later import is watched again
        if not self._watch(spec):
            self.missed = True
            self.remove()
        return spec

    def _begin(self) -> None:
        """torch's import begins (``spec._initializing = True``): watched once."""
        self.remove()
        if self._on_begin is not None:
            try:
                self._on_begin()
            except Exception:
                pass

    def _watch(self, spec) -> bool:
        own = type(spec)
        watch = self

        def get(self):
            return self.__dict__.get("_initializing", False)

        def set_(self, value):
            self.__dict__["_initializing"] = value
            if value:
                watch._begin()
                return
            try:
                self.__class__ = own
            except Exception:
                pass
            module = sys.modules.get(self.name)
            if module is None or getattr(module, "__spec__", None) is not self:
                watch.failed = True
                watch.install()  # the import failed: a retry is watched again
                module = None
            try:
                watch._on_import(module)
            except Exception:  # on_import keeps its own failure; the program's import never sees one
                pass

        try:
            watched = type(own.__name__, (own,), {"_initializing": property(get, set_),
                                                  "__module__": own.__module__, "__qualname__": own.__qualname__})
            spec.__class__ = watched
        except Exception:
            return False
        return True


def _import_system_codes():
    """The code objects of the import system's ``_find_spec`` and of its caller in an import statement."""
    bootstrap = sys.modules.get("_frozen_importlib") or sys.modules.get("importlib._bootstrap")
    try:
        return bootstrap._find_spec.__code__, bootstrap._find_and_load_unlocked.__code__
    except AttributeError:  # a Python whose import system has other names: every caller is an import
        return None


_CODES = _import_system_codes()


def _asked_by_import(caller) -> bool:
    """Whether ``find_spec`` was called by an import of torch (``_find_and_load_unlocked`` -> ``_find_spec``),
    not by ``importlib.util.find_spec`` or a program walking ``sys.meta_path`` (see NOTE [Instrumenting at
    the program's import of torch])."""
    if _CODES is None:
        return True
    find_spec, find_and_load = _CODES
    return caller is not None and caller.f_code is find_spec and caller.f_back is not None \
        and caller.f_back.f_code is find_and_load
