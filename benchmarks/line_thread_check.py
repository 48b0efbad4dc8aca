"""What the thread check costs LineRecord's LINE callback (NOTE [Nodes other threads built] in
tensorscope/instrument/lines.py), for a line that built no node (the common case): the callback as it was
(``before``: the check only where a line is kept) and as it is (``after``: the check first), as closures
alike in one process, interleaved, min of 5 x 3 x 1e6 calls each. Usage: ``python benchmarks/line_thread_check.py``."""
import threading, timeit
from array import array
import torch
seq_nr, ident, main = torch._C._autograd._get_sequence_nr, threading.get_ident, threading.main_thread().ident
def make(check_first):
    starts, codes, lines, last, other = array("q"), [], array("i"), [-1], [0]
    if check_first:
        def on_line(code, line):
            seq = seq_nr()
            if ident() != main:
                if seq > other[0]:
                    other[0] = seq
                return None
            if seq == last[0]:
                codes[-1] = code; lines[-1] = line
                return None
            last[0] = seq; starts.append(seq); codes.append(code); lines.append(line)
            return None
    else:
        def on_line(code, line):
            seq = seq_nr()
            if seq == last[0]:
                codes[-1] = code; lines[-1] = line
                return None
            if ident() != main:
                return None
            last[0] = seq; starts.append(seq); codes.append(code); lines.append(line)
            return None
    return on_line
code = make.__code__
fs = {"before": make(False), "after": make(True)}
for f in fs.values(): f(code, 1)
res = {k: [] for k in fs}
for _ in range(5):
    for k, f in fs.items():
        res[k].append(min(timeit.repeat("f(code, 2)", globals={"f": f, "code": code}, number=1_000_000, repeat=3)) * 1000)
print({k: round(min(v)) for k, v in res.items()}, "ns per line")
