"""The only layer that touches live tensors and hooks (see NOTE [Hot path] in patches.py)."""
