# source: https://learn.biosrag.com/ai/rnn-training-4.html
# expect-kind: none
# The same minGPT-like layout as the failing one, with the state detached at
# the start of each forward (truncated BPTT).
import os
import runpy

here = os.path.dirname(os.path.abspath(__file__))
runpy.run_path(os.path.join(here, "projects", "charrnn", "run.py"), run_name="__main__")
