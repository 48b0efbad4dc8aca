"""The one piece of global state: the recorder of the run in progress (None when idle).

Everything a run records lives on that recorder (tracker.py) and the collaborators it owns. What
else instrument/ keeps at module level is no run's state: caches of facts about the interpreter
(a code object's lines, a type's verdict, a dtype's name, the checksum's constant weights, one
wrapper class per type) and per-thread flags that live for one wrapped call (patches, ddp).
"""

recorder = None
