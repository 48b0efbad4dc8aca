"""A generated 20,000-line training script: every step unrolled at the top level of one file.

Machine-written programs (exported notebooks, code generators, unrolled experiments) are long
and flat: each line runs once, at the module level, far down one code object. The script is
written once per size into the temporary folder and run with ``runpy.run_path`` (the same way
under every mode): 8 lines per step (a forward, backward, four in-place updates under
``no_grad`` and two ``zero_()``), steps = lines / 8.

Lines: max(80, round(20_000 * scale)).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import runpy
import sys
import tempfile

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
LINES = max(80, round(20_000 * SCALE))
HEADER = """import torch
torch.manual_seed(0)
x = torch.randn(16, 8)
y = torch.randn(16, 4)
w1 = torch.randn(8, 16, requires_grad=True)
w2 = torch.randn(16, 4, requires_grad=True)
lr = 0.01
"""
STEP = """h = torch.tanh(x @ w1)
loss = ((h @ w2 - y) ** 2).mean()
loss.backward()
with torch.no_grad():
    w1 -= lr * w1.grad
    w2 -= lr * w2.grad
    w1.grad.zero_()
    w2.grad.zero_()
"""


def script_path(lines: int) -> str:
    """The generated script of ``lines`` lines (written once per size, by this user)."""
    path = os.path.join(tempfile.gettempdir(), f"tensorscope_bench_generated_{os.getuid()}_{lines}.py")
    text = HEADER + STEP * max(1, (lines - HEADER.count("\n")) // STEP.count("\n")) + "print(f'loss={loss.item():.5f}')\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


path = script_path(LINES)
runpy.run_path(path, run_name="__main__")
print(f"generated_script ok lines={LINES}")
