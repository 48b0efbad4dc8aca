"""Which source files are the program's own: everything outside the Python installation.

Torch-free (no import of torch or of tensorscope.instrument), so that the diagnosis layer can tell the
program's frames in a traceback's text (kinds/other.py) by the rule the recording uses (instrument/frames.py).
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: verdict for torch.compile's own frames: what runs under them is tracing, not the program's eager code
COMPILER = "compiler"
_COMPILER_PARTS = tuple(os.sep + p + os.sep for p in (
    os.path.join("torch", "_dynamo"), os.path.join("torch", "_inductor"),
    os.path.join("torch", "_functorch", "_aot_autograd"), os.path.join("torch", "fx", "experimental")))


def _installation_dirs() -> tuple[str, ...]:
    """The folders of the Python installation: nothing below them is the program's own code.

    The standard library and the library folders of this environment and of the base
    installation (a venv's interpreter), the site-packages folders ``site`` knows, the user's
    site-packages, PyTorch's own folder (wherever it was installed from) and tensorscope's.
    """
    dirs = set()
    for scheme_vars in (None, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        try:
            paths = sysconfig.get_paths(vars=scheme_vars) if scheme_vars else sysconfig.get_paths()
        except Exception:
            continue
        dirs.update(paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    try:
        dirs.update(site.getsitepackages())
    except Exception:  # some embedded interpreters' `site` lacks it
        pass
    try:
        dirs.add(site.getusersitepackages())
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        dirs.add(os.path.dirname(torch.__file__))
    out = {os.path.realpath(d).rstrip(os.sep) + os.sep for d in dirs if d}
    out.add(_PACKAGE_DIR)
    return tuple(sorted(out))


# any folder of these names holds installed packages, whichever installation it belongs to
_INSTALLED_PARTS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


class UserCode:
    """Decides which source files are the program's own (cached per filename).

    The program's own code is every file outside the Python installation (see
    ``_installation_dirs``): the script, modules beside it, a package elsewhere that the
    script puts on ``sys.path``, a src layout, the source folder of an editable install.
    Frozen modules and ``<...>`` pseudo-files (``<string>``, ``<frozen runpy>``) are not,
    except ``<stdin>``, the program read by ``tensorscope run -``.
    """

    def __init__(self, program_path: str | None):
        self.program = os.path.realpath(program_path) if program_path else None
        self._library_dirs = _installation_dirs()
        self._verdict: dict[str, bool | str] = {}
        if program_path is not None:
            self._verdict[program_path] = True
        self._verdict["<stdin>"] = True

    def __contains__(self, filename: str) -> bool:
        verdict = self._verdict.get(filename)
        if verdict is None:
            verdict = self._verdict[filename] = self._classify(filename)
        return verdict is True

    def _classify(self, filename: str):
        """True: the program's own code; False: a library; COMPILER: torch.compile's machinery."""
        if not filename or filename.startswith("<"):
            return False
        path = os.path.realpath(filename)
        if path == self.program:
            return True
        if any(part in path for part in _COMPILER_PARTS):
            return COMPILER
        if any(part in path for part in _INSTALLED_PARTS):
            return False
        return not path.startswith(self._library_dirs)
