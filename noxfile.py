"""The compatibility matrix: one nox session per (Python, torch) pair, torch from the package registry.

    nox -l                                  # every session
    nox -s "matrix(3.11-2.2.2)"            # one pair
    nox -t oldest newest                    # the floor and the newest release
    nox -s "matrix(3.11-2.2.2)" -- --full  # the whole test suite instead of the subset
    nox -s "matrix(3.11-2.2.2)" -- --quick # a few tests of each release-dependent path (a loaded machine)

Each session makes a fresh virtual environment (uv when it is installed: ``pip install nox uv``;
it reuses one download of torch's CUDA libraries between sessions), installs that torch with
tensorscope and its test extras, runs the subset of the tests below (or the whole suite with
``-- --full``), then .ci/snippets.py (every snippet under python, ``run -o`` and ``explain``).
PyPI's Linux torch wheels are CUDA builds (~3 GB with their libraries) and run on the CPU.
CI (.ci/run) keeps the pinned CPU build in constraints.txt: this file is not part of it.
The measured matrix is in docs/compatibility.md.
"""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["matrix"]

# (python, torch): the floor and the newest on every Python that has their wheels, then every minor
# release in between on 3.11. PyPI's wheels (2026-11-25): 3.10 from 2.2 to 2.14 (2.15 has none),
# 3.11 and 3.12 from 2.2 to 2.15, 3.13 from 2.5 to 2.15.
PAIRS = [
    ("3.10", "2.2.2"), ("3.11", "2.2.2"), ("3.12", "2.2.2"),
    ("3.11", "2.3.1"), ("3.11", "2.4.1"), ("3.11", "2.5.1"), ("3.11", "2.6.0"), ("3.11", "2.7.1"),
    ("3.11", "2.8.0"), ("3.12", "2.9.1"), ("3.11", "2.10.0"), ("3.11", "2.11.0"), ("3.11", "2.12.1"),
    ("3.11", "2.13.0"), ("3.11", "2.14.1"),
    ("3.10", "2.14.1"), ("3.13", "2.5.1"), ("3.11", "2.15.0"), ("3.12", "2.15.0"), ("3.13", "2.15.0"),
]
OLDEST, NEWEST = "2.2.2", "2.15.0"

# The subset: every command (run, explain, the API, the pytest plugin, the IPython magic), every output
# form (text, JSON, HTML, SARIF), the recognised error texts, the saved-tensor hooks and the
# transparency checks. About a third of the suite; the whole suite with `-- --full`.
SUBSET = [
    "tests/test_snippets.py", "tests/test_cli.py", "tests/test_api.py", "tests/test_pytest_plugin.py",
    "tests/test_ipython.py", "tests/test_render.py", "tests/test_json_writer.py", "tests/test_sarif.py",
    "tests/test_html_report.py", "tests/test_messages.py", "tests/test_saved_hooks.py",
    "tests/test_fingerprint.py", "tests/test_transparency.py", "tests/test_misses.py", "tests/test_compat.py",
    "tests/test_forward_lines.py",  # every node's forward line under run: exact only on Python 3.12+
]


# The quick check, for a loaded machine (a CUDA build of torch can take half a minute to import there):
# tensorscope's release-dependent paths (test_compat, the API in-process) and one test of each check
# that walks references or reads kept values (retention, kept values, torch.func kinds). test_nonfinite
# is left out: it turns the origin mode on, which torch 2.2 and 2.9 do not survive (docs/compatibility.md).
QUICK = [
    "tests/test_compat.py", "tests/test_api.py",
    "tests/test_retention.py::test_retention_path_and_growth_in_json", "tests/test_retention.py::test_api_holders",
    "tests/test_aliasing.py::test_the_cli_finds_each_silent_alias_with_no_false_alarm_on_every_surface",
    "tests/test_functorch.py::test_vmap_inplace_names_where_the_unbatched_tensor_was_made",
]


def _numpy(torch: str) -> str:
    # torch 2.2's wheels were built against NumPy 1.x (they warn and fail on `.numpy()` with 2.x)
    return "numpy<2" if torch.startswith(("2.2.", "2.3.")) else "numpy"


def _tags(torch: str) -> list[str]:
    return [tag for tag, version in (("oldest", OLDEST), ("newest", NEWEST)) if torch == version]


@nox.session
@nox.parametrize("python,torch", [nox.param(py, t, id=f"{py}-{t}", tags=_tags(t)) for py, t in PAIRS])
def matrix(session: nox.Session, torch: str) -> None:
    """One (Python, torch) pair: install that torch, run the tests and the snippets."""
    session.env["PIP_CONSTRAINT"] = os.devnull  # a machine-wide pip constraint must not cap torch here
    session.install(f"torch=={torch}", _numpy(torch), "-e", ".[test]")
    session.run("python", "-c", "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)")
    tests = ["tests"] if "--full" in session.posargs else QUICK if "--quick" in session.posargs else SUBSET
    rest = [a for a in session.posargs if a not in ("--full", "--quick")]
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, *rest)
    session.run("python", ".ci/snippets.py")
