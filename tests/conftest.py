"""Session set-up shared by every test file.

Almost every test spawns `python -m tensorscope ...` (hundreds per run). With PYTHONDONTWRITEBYTECODE
set (as in some CI and dev environments) no child ever writes tensorscope's bytecode, so each one
recompiles the modules it imports (~0.06-0.09 s of CPU per process, measured with -X importtime).
Compiling the package once here lets every child load the cached bytecode. The .pyc files go to
tensorscope's own __pycache__/ folders, which .gitignore excludes; Python checks each one against its
source's mtime and size, so an edited module is recompiled as usual and a run never sees stale code.
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tensorscope"


def pytest_configure(config):
    # Only once per session: in the xdist controller (or the single process without xdist), before the
    # workers spawn anything. A read-only checkout just keeps compiling in each child, as before.
    if hasattr(config, "workerinput"):
        return
    try:
        compileall.compile_dir(str(PACKAGE), quiet=2)
    except OSError:
        pass


# The longest files (setup + call + teardown summed per file, from a whole run with --durations=0; the
# order of 2026-11-26, suite14): started first, longest first, under --dist loadfile, so that the many
# short files fill in around them instead of leaving one worker alone with a long file at the end.
_LONGEST_FIRST = ("test_transparency.py", "test_nonfinite.py", "test_faults.py", "test_retention.py",
                  "test_distributed.py", "test_peer_harness.py", "test_invisible_hooks.py", "test_aliasing.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order
