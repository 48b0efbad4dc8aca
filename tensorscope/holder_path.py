"""Holder paths as the report writes them: each step says what it goes through and how it reads.

NOTE [Holder path steps]
A retention walk (instrument/retention.py, NOTE [Retention walks]) goes from one of the program's
names to a tensor, storage or graph node one reference at a time. The report writes each reference
as a step ``{"via": VIA, "label": LABEL}``: ``label`` is how a PyTorch user would write it
(``history``, ``[17]``, ``.grad_fn MmBackward0``, ``saved `self```), ``via`` what kind of reference
it is, one of ``VIAS``, so a reader (the HTML picture, a script) need not guess it from the label.
Reports of schema_version 2 wrote labels only; ``labels`` and ``text`` read both.
"""

from __future__ import annotations

VIAS = {
    "name": "a name in the program's globals or in a frame's locals",
    "item": "an item of a list, tuple, dict or set (or a functools.partial's argument)",
    "attr": "an attribute of a module (its parameters, buffers and submodules too) or another object",
    "optimizer_state": "an optimizer's `.state`",
    "closure": "a function's closure cell or default value",
    "hook": "a hook dict of a module or tensor (`._forward_hooks[3]`, `._backward_hooks[0]`)",
    "grad_fn": "a tensor's `.grad_fn` (the autograd node that made it)",
    "next": "an edge of the autograd graph (`next_functions`)",
    "saved": "a tensor an autograd node saved for backward",
    "ctx": "an attribute a custom Function's ctx kept (`ctx.x = x`)",
    "variable": "the leaf an AccumulateGrad node accumulates into",
    "base": "a view's `._base`",
    "grad": "a leaf's `.grad`",
    "skip": "steps left out of a long chain of graph nodes (the label says how many)",
}


def json_steps(steps) -> list[dict]:
    """The steps of a walk's path as the report writes them (only ``via`` and ``label``)."""
    return [{"via": s.get("via"), "label": s.get("label")} if isinstance(s, dict) else {"via": None, "label": str(s)}
            for s in steps or ()]


def label(step) -> str:
    return step if isinstance(step, str) else str((step or {}).get("label", "?"))


def labels(steps) -> list[str]:
    return [label(s) for s in steps or ()]


def text(steps, sep: str = " -> ") -> str:
    """``history -> [17] -> .grad_fn MmBackward0``"""
    return sep.join(labels(steps))
