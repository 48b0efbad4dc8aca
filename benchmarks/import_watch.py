"""What a program can see of the ways to hear its import of torch complete (defer16, RESULTS.md).

Usage: python benchmarks/import_watch.py [--modules 300]

Each candidate runs in a fresh interpreter on a stand-in package named ``torch`` (written to a temporary
folder: an ``__init__`` that imports a submodule, and a broken one whose ``__init__`` raises), so nothing
here needs torch itself. Printed per candidate:
- whether the program's traceback of a caught failing ``import torch`` is python's, line for line;
- ``torch.__loader__``/``__spec__.loader`` types, ``type(torch.__spec__)``, ``builtins.__import__`` and the
  length of ``sys.meta_path`` after the import, each against python's;
- the CPU time of importing ``--modules`` small modules before torch (the finder is asked for each), as a
  ratio to python's, minimum of 5 runs.
Candidates: ``spec`` (tensorscope/torch_import.py: the spec's ``_initializing`` setter), ``loader`` (a
finder that wraps the loader's ``exec_module``), ``import`` (a ``builtins.__import__`` wrapper).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = {
    "python": "",
    "spec": """
        from tensorscope.torch_import import TorchImportWatch
        TorchImportWatch(lambda m: m is not None and HEARD.append(m)).install()
    """,
    "loader": """
        import importlib.abc
        class Loader(importlib.abc.Loader):
            def __init__(self, real):
                self.real = real
            def create_module(self, spec):
                return self.real.create_module(spec)
            def exec_module(self, module):
                self.real.exec_module(module)
                HEARD.append(module)
                sys.meta_path.remove(FINDER)
        class Finder:
            def find_spec(self, name, path=None, target=None):
                if name != "torch":
                    return None
                for f in sys.meta_path[1:]:
                    spec = f.find_spec(name, path, target)
                    if spec is not None:
                        spec.loader = Loader(spec.loader)
                        return spec
        FINDER = Finder()
        sys.meta_path.insert(0, FINDER)
    """,
    "import": """
        import builtins
        real_import = builtins.__import__
        def __import__(name, *args, **kwargs):
            module = real_import(name, *args, **kwargs)
            if name.split(".")[0] == "torch" and not HEARD:
                HEARD.append(module)
            return module
        builtins.__import__ = __import__
    """,
}

PROGRAM = """
import builtins, sys, time, traceback
HEARD = []
exec({setup!r})
sys.path.insert(0, {folder!r})
t0 = time.process_time()
for i in range({modules}):
    __import__(f"small_{{i}}")
import_s = time.process_time() - t0
sys.path.insert(0, {broken!r})
try:
    import torch
except OSError:
    tb = traceback.format_exc()
sys.path.remove({broken!r})
import torch
print(repr(dict(heard=len(HEARD), tb=tb, loader=type(torch.__loader__).__name__,
                spec_loader=type(torch.__spec__.loader).__name__, spec=type(torch.__spec__).__qualname__,
                spec_module=type(torch.__spec__).__module__, meta_path=len(sys.meta_path),
                import_is_builtin=type(builtins.__import__).__name__, import_s=import_s)))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, broken = os.path.join(tmp, "ok"), os.path.join(tmp, "broken")
        os.makedirs(os.path.join(folder, "torch"))
        os.makedirs(os.path.join(broken, "torch"))
        with open(os.path.join(folder, "torch", "__init__.py"), "w") as f:
            f.write("from torch import sub\n")
        with open(os.path.join(folder, "torch", "sub.py"), "w") as f:
            f.write("x = 1\n")
        with open(os.path.join(broken, "torch", "__init__.py"), "w") as f:
            f.write("from torch import sub\n")
        with open(os.path.join(broken, "torch", "sub.py"), "w") as f:
            f.write("raise OSError('libtorch_cpu.so: cannot open shared object file')\n")
        for i in range(args.modules):
            with open(os.path.join(folder, f"small_{i}.py"), "w") as f:
                f.write("x = 1\n")
        results = {}
        for name, setup in SETUP.items():
            source = PROGRAM.format(setup=textwrap.dedent(setup), folder=folder, broken=broken,
                                    modules=args.modules)
            runs = []
            for _ in range(5):
                out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                                     env={**os.environ, "PYTHONPATH": REPO}, cwd=tmp)
                if out.returncode != 0:
                    raise SystemExit(f"{name}: {out.stderr}")
                runs.append(eval(out.stdout))
            r = dict(runs[0], import_s=min(x["import_s"] for x in runs))
            results[name] = r
        py = results["python"]
        for name, r in results.items():
            same_tb = r["tb"] == py["tb"]
            print(f"{name:7s} heard={r['heard']} traceback_same={same_tb} ({len(r['tb'].splitlines())} lines "
                  f"vs {len(py['tb'].splitlines())}) loader={r['loader']} spec.loader={r['spec_loader']} "
                  f"spec={r['spec_module']}.{r['spec']} meta_path={r['meta_path']} (python {py['meta_path']}) "
                  f"__import__={r['import_is_builtin']} import_cpu={r['import_s'] / py['import_s']:.3f}x")
            if not same_tb and name != "python":
                extra = [line for line in r["tb"].splitlines() if line not in py["tb"].splitlines()]
                print("        lines not in python's traceback:", *extra[:6], sep="\n          ")


if __name__ == "__main__":
    main()
