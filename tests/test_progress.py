"""The live progress line: on a terminal only, erased at the end, absent from pipes and files."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap

SLOW = textwrap.dedent("""
    import time, torch
    x = torch.zeros(3)
    for i in range(28):
        x.add_(1)
        time.sleep(0.1)
    print("done")
""")


def test_progress_line_on_a_terminal(tmp_path):
    prog = tmp_path / "slow.py"
    prog.write_text(SLOW)
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "-o", str(tmp_path / "r.json"), str(prog)],
                            stdout=subprocess.PIPE, stderr=secondary, cwd=tmp_path)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    out, _ = proc.communicate(timeout=120)
    os.close(primary)
    tty = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert out == b"done\n"
    assert "tensorscope: " in tty and " events, " in tty
    assert tty.endswith("\r\x1b[2K")  # erased at the end


def test_no_progress_line_in_a_pipe(tmp_path):
    prog = tmp_path / "slow.py"
    prog.write_text(SLOW)
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "-o", str(tmp_path / "r.json"), str(prog)],
                          capture_output=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and proc.stdout == b"done\n" and proc.stderr == b""
