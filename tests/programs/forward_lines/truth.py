"""The forward line of every node of a failing backward, as torch's anomaly mode records it.

`python truth.py PROGRAM NAME`: runs PROGRAM under anomaly mode, then walks the graph of its global
NAME (the root whose backward failed) and prints JSON: [node name, innermost line of PROGRAM] per
node, read from the forward traceback anomaly mode stores in each node's metadata.
`python truth.py PROGRAM`: prints JSON [node name, innermost line of PROGRAM] of the node whose
backward failed, from the "Error detected in ..." warning anomaly mode gives with its forward traceback.
"""
import json
import re
import sys
import warnings

import torch

path = sys.argv[1]
scope = {"__name__": "__main__", "__file__": path}
torch.autograd.set_detect_anomaly(True, check_nan=False)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), scope)
    except RuntimeError:
        pass
if len(sys.argv) == 2:
    for w in caught:
        m = re.search(r"Error detected in (\w+)\. Traceback of forward call that caused the error:\n(.*)",
                      str(w.message), re.S)
        if m:
            lines = re.findall(r'File "' + re.escape(path) + r'", line (\d+)', m.group(2))
            print(json.dumps([m.group(1), int(lines[-1])]))
    sys.exit(0)
root = sys.argv[2]
# `seen` keeps each node's Python object: `next_functions` may make a new one at each read (2.2.2 to 2.9.1),
# and the id of one freed is soon another node's
out, seen, stack = [], {}, [scope[root].grad_fn]
while stack:
    node = stack.pop()
    if node is None or id(node) in seen or hasattr(node, "variable"):
        continue
    seen[id(node)] = node
    lines = [int(m) for entry in node.metadata.get("traceback_", [])
             for m in re.findall(r'File "(?:[^"]*)", line (\d+)', entry) if f'"{path}"' in entry]
    out.append([type(node).__name__, lines[-1] if lines else None])
    stack.extend(n for n, _ in node.next_functions)
print(json.dumps(sorted(out, key=str)))
