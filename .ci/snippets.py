"""Every snippet under plain python, `tensorscope run -o R.json` and `tensorscope explain`, on the torch installed.

The matrix's smoke check (noxfile.py runs it in every session): `run` must exit with the
program's own status and print the program's own stdout; neither command may stop with
tensorscope's internal error (exit 4); `explain` exits 0 or 1 (docs/CONTRACT.md, Exit codes).
Prints one line per snippet and exits 1 if any check failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERNAL = 4


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def check(snippet: Path, report: Path) -> list[str]:
    plain = _run(str(snippet))
    run = _run("-m", "tensorscope", "run", "-o", str(report), str(snippet))
    explain = _run("-m", "tensorscope", "explain", str(snippet))
    problems = []
    if run.returncode != plain.returncode:
        problems.append(f"run exited {run.returncode}, python {plain.returncode}")
    if run.stdout != plain.stdout:
        problems.append("run changed the program's stdout")
    if explain.returncode not in (0, 1):
        problems.append(f"explain exited {explain.returncode}")
    for name, proc in (("run", run), ("explain", explain)):
        if "internal error" in proc.stderr or proc.returncode == INTERNAL:
            problems.append(f"{name}: internal error: {proc.stderr.strip().splitlines()[-1:]}")
    try:
        json.loads(report.read_text())
    except (OSError, ValueError) as e:
        problems.append(f"run -o wrote no JSON report ({e})")
    return problems


def main() -> int:
    import torch

    failed = 0
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        for snippet in sorted((ROOT / "snippets").glob("*.py")):
            report = Path(tmp) / (snippet.stem + ".json")
            problems = check(snippet, report)
            failed += bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {snippet.name}" + "".join(f"\n     {p}" for p in problems))
    print(f"{failed} snippet(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
