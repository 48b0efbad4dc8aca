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


def _run_on_ptys(tmp_path, stdout_tty: bool):
    """The CLI with stderr on a pty and stdout on a pty or a pipe: (returncode, stdout, what the stderr pty saw)."""
    prog = tmp_path / "slow.py"
    prog.write_text(SLOW)
    err_primary, err_secondary = pty.openpty()
    if stdout_tty:
        out_primary, out_secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tensorscope", "run", "-o", str(tmp_path / "r.json"), str(prog)],
                            stdout=out_secondary if stdout_tty else subprocess.PIPE, stderr=err_secondary,
                            cwd=tmp_path)
    os.close(err_secondary)
    if stdout_tty:
        os.close(out_secondary)

    def drain(fd):
        chunks = []
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.close(fd)
        return b"".join(chunks)

    if stdout_tty:
        import threading

        got = {}
        t = threading.Thread(target=lambda: got.setdefault("out", drain(out_primary)))
        t.start()
        tty = drain(err_primary)
        proc.wait(timeout=900)
        t.join()
        out = got["out"].replace(b"\r\n", b"\n")
    else:
        tty = drain(err_primary)
        out, _ = proc.communicate(timeout=900)
    return proc.returncode, out, tty.decode()


def test_progress_line_on_a_terminal(tmp_path):
    rc, out, tty = _run_on_ptys(tmp_path, stdout_tty=True)
    assert rc == 0
    assert out == b"done\n"
    assert "tensorscope: " in tty and " events, " in tty
    assert tty.endswith("\r\x1b[2K")  # erased at the end


def test_no_progress_line_when_stdout_is_a_pipe_or_a_pager(tmp_path):
    # `tensorscope run p.py | less`: stderr is still the terminal, but the line would land on the pager's screen
    rc, out, tty = _run_on_ptys(tmp_path, stdout_tty=False)
    assert rc == 0 and out == b"done\n"
    assert tty == ""


def test_no_progress_line_in_a_pipe(tmp_path):
    prog = tmp_path / "slow.py"
    prog.write_text(SLOW)
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "-o", str(tmp_path / "r.json"), str(prog)],
                          capture_output=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0 and proc.stdout == b"done\n" and proc.stderr == b""
