"""The README's Quick start is what CI runs and never pulls the CUDA build of torch; its exit codes are ExitCode."""

from __future__ import annotations

import re
from pathlib import Path

from tensorscope.exitcodes import ExitCode

ROOT = Path(__file__).resolve().parents[1]


def quick_start_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)\n```", section, re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    install_and_run, install_and_test = quick_start_commands()
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_and_test in ci.splitlines()
    assert "pytest" in install_and_test


def test_setup_pins_the_cpu_build():
    for cmd in quick_start_commands():
        assert "-c constraints.txt" in cmd
    pins = [l for l in (ROOT / "constraints.txt").read_text().splitlines() if l.startswith("torch")]
    assert pins == ["torch==2.13.0+cpu"]


def test_the_exit_codes_table_lists_exactly_tensorscope_exitcodes():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {int(m) for m in re.findall(r"(?m)^\| (\d+) \|", section)}
    assert codes == {int(c) for c in ExitCode}
    assert "| n |" in section  # the program's own sys.exit(n), passed on as python does
