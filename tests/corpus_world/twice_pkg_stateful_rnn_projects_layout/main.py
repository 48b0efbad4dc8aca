# source: https://learn.biosrag.com/ai/rnn-training-4.html
# expect-kind: backward-twice
# A minGPT-like layout: main.py runs projects/charrnn/run.py, which imports the
# rnnlib package from the repository root. The model keeps its hidden state as
# an attribute and carries it into the next batch without detaching it.
import os
import runpy

here = os.path.dirname(os.path.abspath(__file__))
runpy.run_path(os.path.join(here, "projects", "charrnn", "run.py"), run_name="__main__")
