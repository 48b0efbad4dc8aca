"""The raw cost of the two ways Python 3.10/3.11 could hear the program's lines for the forward line
of every autograd node (NOTE [Forward lines from line events] in tensorscope/instrument/lines.py):

    OMP_NUM_THREADS=1 python benchmarks/line_hearing_cost.py MODE benchmarks/workloads/gpt_train.py

MODE: plain | trace (``sys.settrace``: a local trace function on the program's file only, noting
autograd's next sequence nr at each line) | profile (``sys.setprofile``: noting it at each C call
made from the program's file). Prints the CPU time of the workload (one thread) and the notes kept.
Both are the mechanism alone, without the rest of ``tensorscope run``.
"""
import runpy
import sys
import time

import torch

mode, prog = sys.argv[1], sys.argv[2]
sys.argv = [prog]
seq = torch._C._autograd._get_sequence_nr
notes = []
note = notes.append
if mode == "trace":
    def local(frame, event, arg):
        if event == "line":
            note(seq())
        return local
    def glob(frame, event, arg):
        return local if frame.f_code.co_filename == prog else None
    sys.settrace(glob)
elif mode == "profile":
    def prof(frame, event, arg):
        if event == "c_call" and frame.f_code.co_filename == prog:
            note(seq())
    sys.setprofile(prof)
t0 = time.process_time()
runpy.run_path(prog, run_name="__main__")
sys.settrace(None)
sys.setprofile(None)
print(f"{mode} cpu={time.process_time() - t0:.2f}s notes={len(notes)}", file=sys.stderr)
