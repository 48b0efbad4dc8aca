"""The one piece of global state: the recorder of the run in progress (None when idle).

Everything a run records lives on that recorder (tracker.py) and the collaborators it owns. What
else instrument/ keeps at module level is no run's state: caches of facts about the interpreter
(a code object's lines, a type's verdict, a dtype's name, the checksum's constant weights, one
wrapper class per type) and per-thread flags that live for one wrapped call (patches, ddp).
"""

recorder = None
# idents of the threads inside a write wrapper's call: a set, not a ``threading.local`` flag, which cost
# three times as much to read and set (about 0.5 us of every in-place write); read by patches.make_write,
# set by Tracker.write_call and by the steps recorded whole (optimizer_steps.py)
IN_WRITE: set = set()
# idents of the threads whose calls are tensorscope's own work (a sink's check, a growth sample): their
# wrappers record nothing, while the program's other threads are recorded (NOTE [Pausing the recorder]
# in tracker.py): ident -> pauses open in that thread. Set by Tracker.pause and resume; an empty dict is one
# truth test on the hot path.
PAUSED: dict = {}
