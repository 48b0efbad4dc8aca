"""The one piece of global state: the recorder of the run in progress (None when idle)."""

recorder = None
